"""`coopnn.to_device(x)`: float32 (or float16) arrays that stay in GPU memory, for users without PyTorch; `Model.run`
takes them and returns them with no host round trip, and `.numpy()` brings one back.

A device array lives in the device's shared Vulkan context (`runtime/vk/shared.py`), in memory exported as an
opaque fd (`vk_export.ExportedBuffer`). A model in the same shared context binds it directly; one in another (made
with different features or validation) imports it the first time it reads or writes it (`runtime/vk/fd_import.py`)
and keeps that import for the array's life. Inputs are read where they are, outputs are written into new device
arrays. So a device array outlives any model, and the output of one model can
be the input of another on the same device. The storage of collected arrays is reused, imports included, so runs in
a loop allocate nothing once warm. Ordering: each upload, download and run waits for its own submission, so
whatever a call returns is complete on the device.

One run binds each array whole, so a batch is bounded by the device's largest storage-buffer binding
(maxStorageBufferRange: 4 GiB on NVIDIA, 128 MiB on lavapipe); InputError names the bound.

Float16 arrays (`dtype="float16"`) run through the executable's float16-I/O kernel (`KernelExecutable.kernel_for`),
which reads and writes float16 rows, half the bytes; their outputs are float16 device arrays. Everything else that
binds a device array (training steps) reads float32 ones and refuses float16 ones by name (`bound_in`).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Mapping

import numpy as np

from coopnn.errors import InputError

# numpy dtype -> the shaders' name for it (`shaders.targets.base.Binding.dtype`)
DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}

_arenas: dict = {}
_arenas_lock = threading.Lock()


def _arena(device):
    """The scope of the device's newest shared context (`runtime/vk/shared.py`) that new device arrays of `device` (as
    `coopnn.load` takes it) go to; arrays made earlier keep theirs alive."""
    from coopnn.runtime.vk.fd_import import EXTENSION
    from coopnn.runtime.vk.shared import open_context

    with _arenas_lock:
        current = _arenas.get(device)
        newest = open_context(device, extensions={EXTENSION})
        if current is not None and newest.shared_context is current.shared_context:
            newest.close()
            return current
        _arenas[device] = newest
        return newest


class _Storage:
    """An exported buffer of the arena and its imports into model contexts (by context id)."""

    def __init__(self, arena, nbytes: int):
        from coopnn.interop.vk_export import ExportedBuffer

        self.buffer = ExportedBuffer(arena, nbytes)
        self.imports: dict[int, Any] = {}
        self.lock = threading.Lock()

    def release(self) -> None:
        for imported in self.imports.values():
            imported.destroy()
        self.buffer.destroy()


class _StoragePool:
    """Storage that collected device arrays gave back, imports included, for the next array of the same size: a run
    that returns new device arrays then allocates and imports nothing in the steady state. Idle storage is kept up to
    IDLE_BYTES in all; beyond that the oldest is freed."""

    def __init__(self):
        self._idle: list[_Storage] = []
        self._idle_bytes = 0
        self._lock = threading.Lock()

    def take(self, arena, nbytes: int) -> _Storage:
        with self._lock:
            for i, storage in enumerate(self._idle):
                if storage.buffer.size == nbytes and storage.buffer.context is arena:
                    del self._idle[i]
                    self._idle_bytes -= nbytes
                    return storage
        return _Storage(arena, nbytes)

    def give_back(self, storage: _Storage) -> None:
        dropped = []
        with self._lock:
            self._idle.append(storage)
            self._idle_bytes += storage.buffer.size
            while self._idle_bytes > IDLE_BYTES:
                oldest = self._idle.pop(0)
                self._idle_bytes -= oldest.buffer.size
                dropped.append(oldest)
        for storage in dropped:
            storage.release()


IDLE_BYTES = 1 << 30
_POOL = _StoragePool()


def array_dtype(dtype) -> np.dtype:
    """`dtype` (anything numpy takes) as one a device array holds, float32 or float16; InputError otherwise."""
    try:
        chosen = np.dtype(dtype)
    except TypeError:
        chosen = None
    if chosen not in DTYPES:
        raise InputError(f"device arrays hold float32 or float16, not {dtype!r}")
    return chosen


class DeviceArray:
    """A C-contiguous float32 or float16 array in GPU memory. `shape`, `dtype`, `nbytes`, `numpy()`; made by
    `coopnn.to_device` or returned by `Model.run`."""

    def __init__(self, shape: tuple[int, ...], device=None, dtype=np.float32):
        self.shape = tuple(int(n) for n in shape)
        self.device = device
        self.dtype = array_dtype(dtype)
        self.arena = _arena(device)
        self._storage = _POOL.take(self.arena, max(self.nbytes, 4))
        self._buffer = self._storage.buffer
        weakref.finalize(self, _POOL.give_back, self._storage)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<coopnn.DeviceArray shape={self.shape} {self.dtype} on {self.arena.info.name}>"

    def numpy(self) -> np.ndarray:
        """A host copy of the array."""
        from coopnn.runtime.vk.memory import download_through_staging

        if not self.nbytes:
            return np.empty(self.shape, self.dtype)
        return download_through_staging(self.arena, self._buffer.handle, 0, self.nbytes).view(self.dtype).reshape(
            self.shape)

    def write(self, values: np.ndarray) -> None:
        from coopnn.runtime.vk.memory import upload_through_staging

        if self.nbytes:
            upload_through_staging(self.arena, self._buffer.handle, 0,
                                   np.ascontiguousarray(values, self.dtype).reshape(-1).view(np.uint8))

    def bound_in(self, context, dtype=np.float32):
        """This array's memory as a buffer of `context`: itself in the same shared context, else imported on first
        use. `dtype`: what the kernel binding it reads; InputError when the array holds another."""
        from coopnn.runtime.vk.fd_import import ImportedFdBuffer

        if self.dtype != np.dtype(dtype):
            raise InputError(f"this device array holds {self.dtype}; {np.dtype(dtype)} is read here: make it with "
                             f"coopnn.to_device(x, dtype={str(np.dtype(dtype))!r})")
        if context.info.index != self.arena.info.index:
            raise InputError(f"this device array lives on {self.arena.info.name}; the model runs on "
                             f"{context.info.name}")
        if context.shared_context is self.arena.shared_context:
            return self._buffer
        storage = self._storage
        with storage.lock:
            imported = storage.imports.get(id(context))
            if imported is None or not imported.alive:
                imported = storage.imports[id(context)] = ImportedFdBuffer(context, self._buffer)
            return imported


def to_device(x: Any, device=None, dtype="float32") -> DeviceArray:
    """`x` (any float array) copied once into GPU memory as `dtype` (float32 or float16): a `DeviceArray` that
    `Model.run` takes and returns without host round trips. `device` as `coopnn.load` takes it; models must run on
    the same device."""
    chosen = array_dtype(dtype)
    try:
        values = np.asarray(x, dtype=chosen)
    except (TypeError, ValueError) as e:
        raise InputError(f"to_device takes an array of numbers: {e}") from None
    array = DeviceArray(values.shape, device, chosen)
    array.write(values)
    return array


def run_on_device(executable, feeds: Mapping[str, DeviceArray]) -> dict[str, DeviceArray]:
    """Run `executable` (a `KernelExecutable`) on device arrays keyed by input name, into new device arrays."""
    from coopnn.runtime.vk.commands import Dispatch

    graph = executable.graph
    batch = next(iter(feeds.values())).shape[0]
    for v in graph.inputs:
        shape = feeds[v.name].shape
        if shape[1:] != v.features or shape[0] != batch:
            raise InputError(f"device array for input {v.name!r} has shape {list(shape)}; expected "
                             f"[{batch}, {', '.join(map(str, v.features))}]")
    boolean = [v.name for v in graph.outputs if v.dtype == "bool"]
    if boolean:
        raise InputError(f"outputs {boolean} are boolean; device arrays hold floats: run this model on numpy arrays")
    dtypes = {a.dtype for a in feeds.values()}
    if len(dtypes) > 1:
        raise InputError(f"device arrays of one run hold one dtype; these hold "
                         f"{', '.join(sorted(str(d) for d in dtypes))}")
    dtype = dtypes.pop()
    binary, kernel = executable.kernel_for(DTYPES[dtype])
    context = executable.context
    device = next(iter(feeds.values())).device
    outputs = {v.name: DeviceArray((batch,) + v.features, device, dtype) for v in executable.graph.outputs}
    if batch == 0:
        return outputs
    limit = context.info.limits.max_storage_buffer_range
    widest = max(a.nbytes for a in list(feeds.values()) + list(outputs.values()))
    if widest > limit:
        raise InputError(f"a run on device arrays binds each array whole; {context.info.name} binds at most {limit} "
                         f"bytes (a batch of {batch} needs {widest}): split the batch")
    buffers = ((executable.weight_buffer,) + tuple(feeds[b.name].bound_in(context, dtype) for b in executable.inputs)
               + tuple(outputs[b.name].bound_in(context, dtype) for b in executable.outputs))
    with executable.gate.shared():
        executable.last_gpu_ms = context.run(
            [Dispatch(kernel, buffers, binary.pack_push(count=batch), kernel.group_count_for(batch))], downloads={})
    return outputs
