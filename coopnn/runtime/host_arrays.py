"""Output arrays of large batches, from page-aligned blocks that earlier outputs gave back.

A fresh 128 MiB numpy array takes 32,768 page faults on first touch, which cost more than copying the results into
it. So large outputs are views of blocks kept in a process-wide pool: when the last array viewing a block is
collected, the block returns to the pool, already faulted in, for the next output of a size it can hold. Idle blocks
are kept up to IDLE_BYTES in all; beyond that the oldest go back to the system.

Blocks are page-aligned anonymous mappings, whole multiples of BLOCK_GRANULE, so a Vulkan device can import one
(`coopnn.runtime.vk.host_import`) and copy results straight into it; a block keeps its imports, one per context, and
destroys them before its memory is unmapped.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import threading
import weakref
from collections import deque
from typing import Callable

import numpy as np

# Below this, numpy's own allocator is as fast.
POOLED_BYTES = 1 << 20
IDLE_BYTES = 1 << 30
# Blocks are sized in these steps: a multiple of every host-pointer import alignment seen (4 KiB on NVIDIA and Mesa).
BLOCK_GRANULE = 64 << 10


class Block:
    """A page-aligned host allocation and what Vulkan contexts imported of it."""

    def __init__(self, nbytes: int):
        self.size = -(-nbytes // BLOCK_GRANULE) * BLOCK_GRANULE
        self._mapping = mmap.mmap(-1, self.size)
        self.array = np.frombuffer(self._mapping, np.uint8)
        self.address = self.array.ctypes.data
        self._imports: dict[int, object] = {}
        self._lock = threading.Lock()

    def imported(self, key: int, make: Callable[[], object]):
        """The import of this block for the context `key` (its id), made by `make()` on first use or when the
        previous one was released with its context."""
        with self._lock:
            existing = self._imports.get(key)
            if existing is None or not existing.alive:
                existing = self._imports[key] = make()
            return existing

    def release(self) -> None:
        """Destroy every import, before the memory goes back to the system."""
        with self._lock:
            imports, self._imports = list(self._imports.values()), {}
        for imported in imports:
            imported.destroy()


class _BlockPool:
    def __init__(self, idle_limit: int):
        self._idle: deque[Block] = deque()
        self._idle_bytes = 0
        self._idle_limit = idle_limit
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> Block:
        """An idle block of at least `nbytes` (the smallest that fits, within twice the size), else a new one."""
        with self._lock:
            fitting = [b for b in self._idle if nbytes <= b.size <= 2 * nbytes + BLOCK_GRANULE]
            if fitting:
                block = min(fitting, key=lambda b: b.size)
                self._idle.remove(block)
                self._idle_bytes -= block.size
                return block
        return Block(nbytes)

    def give_back(self, block: Block) -> None:
        dropped = []
        with self._lock:
            self._idle.append(block)
            self._idle_bytes += block.size
            while self._idle_bytes > self._idle_limit:
                oldest = self._idle.popleft()
                self._idle_bytes -= oldest.size
                dropped.append(oldest)
        for old in dropped:
            old.release()


_POOL = _BlockPool(IDLE_BYTES)
# Blocks in use by the id of the ctypes object their arrays view (ctypes arrays are not hashable); an entry goes when
# that object is collected, before its id can be reused.
_BLOCK_OF: dict[int, Block] = {}


def _returned(key: int, block: Block) -> None:
    _BLOCK_OF.pop(key, None)
    _POOL.give_back(block)


def empty(shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array; large ones are views of a pooled block (see the module docstring), which
    the GPU writes directly when the array is passed to `Model.run(x, out=...)`. Exported as `coopnn.empty`."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes < POOLED_BYTES:
        return np.empty(shape, dtype)
    block = _POOL.take(nbytes)
    # A ctypes view of the block is the arrays' base: numpy keeps it alive while any array or view of it lives, and
    # its collection (which nothing else can cause, since only those arrays refer to it) returns the block.
    exporter = (ctypes.c_char * nbytes).from_address(block.address)
    _BLOCK_OF[id(exporter)] = block
    weakref.finalize(exporter, _returned, id(exporter), block)
    return np.frombuffer(exporter, dtype, count).reshape(shape)


def block_of(array: np.ndarray) -> tuple[Block, int] | None:
    """The pooled block `array` views and the byte offset of its first element there; None for other arrays."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    block = _BLOCK_OF.get(id(base)) if base is not None else None
    if block is None or ctypes.addressof(base) != block.address:
        return None
    return block, array.ctypes.data - block.address
