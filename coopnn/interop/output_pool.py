"""The bridge's outputs: `OutputPool` lends `SharedBuffer`s for the kernel to write into, and `CudaOutput` is what the
caller's framework wraps, viewing that buffer.

Memory. The kernel writes into buffers of this pool, and the caller gets each back as an array of its framework
viewing that buffer: no copy. A buffer lent for a batch that one dispatch binds is no larger than a binding may be
(maxStorageBufferRange); a larger batch runs chunk by chunk and its chunks are copied in (`slot.py`).

Lifetimes:
  - An output array keeps its buffer alive. When it is collected the buffer returns to the pool, to be written again
    only by a later run on the same stream: stream order then puts the kernel's next write after every use queued on
    that stream before the array was dropped. Using an output on another stream is the caller's to synchronise before
    dropping it, as with PyTorch's caching allocator. Beyond IDLE_LIMIT pooled buffers, the oldest are freed at the
    next run, after a cuCtxSynchronize.
  - Closing the pool (the bridge closed) frees the idle buffers and destroys the Vulkan side of buffers that live
    outputs still view: their memory stays valid, held by CUDA's import, until the last array viewing it is collected,
    which frees it then (after a cuCtxSynchronize, since no later run orders that for it). So an output may outlive its
    model.
"""

from __future__ import annotations

import collections
import math
import threading
import weakref

from coopnn.interop import tensors
from coopnn.interop.cuda_driver import CudaDriver
from coopnn.interop.shared_objects import SharedBuffer, capacity

# Pooled output buffers kept idle at most; the oldest beyond this are freed.
IDLE_LIMIT = 8


class CudaOutput:
    """One output in pooled memory, exposing `__cuda_array_interface__`; when collected, it gives the memory back to
    the pool (or frees it, when its bridge is closed). `stream` is what the interface reports: None while the bridge
    wraps it in the caller's framework (PyTorch and CuPy are then used on that stream already)."""

    def __init__(self, pointer: int, shape: tuple[int, ...], typestr: str, stream: int | None = None):
        self.pointer = pointer
        self.shape = shape
        self.typestr = typestr
        self.nbytes = math.prod(shape) * tensors.ACCEPTED_TYPESTRS[typestr]
        self.stream = stream

    @property
    def __cuda_array_interface__(self) -> dict:
        interface = {"shape": self.shape, "typestr": self.typestr, "data": (self.pointer, False), "strides": None,
                     "version": 3}
        if self.stream is not None:
            interface["stream"] = 1 if self.stream == tensors.CU_STREAM_LEGACY else self.stream
        return interface


class OutputPool:
    """Shared buffers for outputs: lent to `CudaOutput`s, given back when they are collected, reused per stream."""

    def __init__(self, context, driver: CudaDriver, cuda_context: int, bindable_limit: int):
        self._context = context
        self._driver = driver
        self._cuda_context = cuda_context
        self._bindable_limit = bindable_limit
        # Re-entrant: an output collected by a garbage collection that runs inside a locked section gives back here.
        self._lock = threading.RLock()
        self._idle: list[tuple[int, SharedBuffer]] = []  # (stream, buffer), oldest first
        self._returned: collections.deque[tuple[int, SharedBuffer]] = collections.deque()
        self._lent: set[SharedBuffer] = set()
        self.closed = False

    def lend(self, nbytes: int, stream: int, bindable: bool) -> SharedBuffer:
        """A buffer of at least `nbytes` for a run on `stream` (no larger than a binding may be when `bindable`)."""
        limit = self._bindable_limit if bindable else nbytes
        with self._lock:
            fitting = [(buffer.size, i) for i, (s, buffer) in enumerate(self._idle)
                       if s == stream and nbytes <= buffer.size and (not bindable or buffer.size <= limit)]
            if fitting:
                _, index = min(fitting)
                buffer = self._idle.pop(index)[1]
                self._lent.add(buffer)
                return buffer
        buffer = SharedBuffer(self._context, self._driver, capacity(nbytes, limit))
        with self._lock:
            self._lent.add(buffer)
        return buffer

    def output(self, buffer: SharedBuffer, shape: tuple[int, ...], typestr: str, stream: int) -> CudaOutput:
        output = CudaOutput(buffer.pointer, shape, typestr)
        weakref.finalize(output, self.give_back, buffer, stream).atexit = False
        return output

    def give_back(self, buffer: SharedBuffer, stream: int) -> None:
        """Called when an output viewing `buffer` is collected, on whatever thread drops it."""
        with self._lock:
            if not self.closed:
                self._returned.append((stream, buffer))
                return
            self._lent.discard(buffer)
        with self._driver.current(self._cuda_context):
            self._driver.synchronize()
            buffer.release_cuda()

    def reclaim(self) -> None:
        """Make returned buffers idle again; free the oldest beyond IDLE_LIMIT once CUDA is done with them."""
        with self._lock:
            while self._returned:
                stream, buffer = self._returned.popleft()
                self._lent.discard(buffer)
                self._idle.append((stream, buffer))
            excess = max(0, len(self._idle) - IDLE_LIMIT)
            victims = [buffer for _, buffer in self._idle[:excess]]
            del self._idle[:excess]
        if victims:
            with self._driver.current(self._cuda_context):
                self._driver.synchronize()
                for buffer in victims:
                    buffer.release_cuda()
                    buffer.release_vulkan()

    def take_back(self, buffer: SharedBuffer, stream: int) -> None:
        """Return a buffer lent to a run that failed before an output was made of it."""
        with self._lock:
            self._lent.discard(buffer)
            self._idle.append((stream, buffer))

    def close(self) -> None:
        """Free idle buffers (CUDA must be done with them: the caller synchronised) and the Vulkan side of lent ones;
        lent buffers are freed on CUDA's side by their outputs from now on."""
        with self._lock:
            self.closed = True
            idle = [buffer for _, buffer in self._idle] + [buffer for _, buffer in self._returned]
            self._idle = []
            self._returned.clear()
            self._lent -= set(idle)
            lent = list(self._lent)
        for buffer in idle:
            buffer.release_cuda()
            buffer.release_vulkan()
        for buffer in lent:
            buffer.release_vulkan()

    def counts(self) -> dict[str, int]:
        with self._lock:
            returned = {buffer for _, buffer in self._returned}
            return {"idle": len(self._idle) + len(returned), "lent": len(self._lent - returned)}
