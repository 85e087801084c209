"""Output arrays of large batches, from memory that earlier outputs gave back: no page faults in the steady state.

A fresh 128 MiB numpy array takes 32,768 page faults on first touch, and on the H100 machine they cost more than
copying the results into it (a whole `run()` of `mlp_64_128x4_16` at 2^21 samples: 91 ms into new arrays, 63 ms into
reused ones). So large outputs are views of blocks kept in a process-wide pool: when the last array viewing a block is
collected, the block returns to the pool, already faulted in, for the next output of a size it can hold. Idle blocks
are kept up to IDLE_BYTES in all; beyond that the oldest go back to the system.
"""

from __future__ import annotations

import ctypes
import math
import threading
import weakref
from collections import deque

import numpy as np

# Below this, numpy's own allocator is as fast.
POOLED_BYTES = 1 << 20
IDLE_BYTES = 1 << 30


class _BlockPool:
    def __init__(self, idle_limit: int):
        self._idle: deque[np.ndarray] = deque()
        self._idle_bytes = 0
        self._idle_limit = idle_limit
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        """An idle block of at least `nbytes` (the smallest that fits, within twice the size), else a new one."""
        with self._lock:
            fitting = [i for i, b in enumerate(self._idle) if nbytes <= b.size <= 2 * nbytes]
            if fitting:
                index = min(fitting, key=lambda i: self._idle[i].size)
                block = self._idle[index]
                del self._idle[index]  # by position: numpy arrays compare element by element
                self._idle_bytes -= block.size
                return block
        return np.empty(nbytes, np.uint8)

    def give_back(self, block: np.ndarray) -> None:
        with self._lock:
            self._idle.append(block)
            self._idle_bytes += block.size
            while self._idle_bytes > self._idle_limit:
                self._idle_bytes -= self._idle.popleft().size


_POOL = _BlockPool(IDLE_BYTES)


def empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised C-contiguous array; large ones are views of a pooled block (see the module docstring)."""
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes < POOLED_BYTES:
        return np.empty(shape, dtype)
    block = _POOL.take(nbytes)
    # A ctypes view of the block is the arrays' base: numpy keeps it alive while any array or view of it lives, and
    # its collection (which nothing else can cause, since only those arrays refer to it) returns the block.
    exporter = (ctypes.c_char * nbytes).from_address(block.ctypes.data)
    weakref.finalize(exporter, _POOL.give_back, block)
    return np.frombuffer(exporter, dtype, count).reshape(shape)
