"""ctypes bindings to the CUDA driver API (`libcuda.so.1`): what sharing Vulkan memory and semaphores with CUDA needs.

The library is loaded on first use, never by `import coopnn`, and nothing here needs the CUDA toolkit or any Python
CUDA package. The struct layouts are copied from CUDA's `cuda.h` (CUDA 12: `CUDA_EXTERNAL_MEMORY_HANDLE_DESC`,
`CUDA_EXTERNAL_MEMORY_BUFFER_DESC`, `CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC`, `CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS`,
`CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS`, `CUDA_MEMCPY2D`), unions and `reserved` arrays included;
`tests/interop/test_cuda_driver.py` pins their sizes and offsets. Functions are bound by their versioned symbol where
`cuda.h` maps the plain name to one (`cuMemFree` is `cuMemFree_v2`, ...).

Every call whose CUresult is not CUDA_SUCCESS raises `CudaError` naming the function and CUDA's own error string; a
missing `libcuda.so.1` (no NVIDIA driver) or a driver without a device raises `BackendUnavailableError`. Handles cross
as Python ints: contexts, streams, external memory and semaphore objects as pointers, device memory as CUdeviceptr.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
from typing import Iterator

from coopnn.errors import BackendUnavailableError, DeviceError

LIBRARY = "libcuda.so.1"

CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100
CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD = 1
CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD = 9
CUDA_EXTERNAL_MEMORY_DEDICATED = 0x1
CU_MEMORYTYPE_DEVICE = 0x02
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
CU_STREAM_WAIT_VALUE_GEQ = 0x0

CUresult = ctypes.c_int
CUdevice = ctypes.c_int
CUdeviceptr = ctypes.c_ulonglong
Handle = ctypes.c_void_p  # CUcontext, CUstream, CUexternalMemory, CUexternalSemaphore, CUarray


class CudaError(DeviceError):
    """A CUDA driver call failed; `function` and `code` say which and how."""

    def __init__(self, function: str, code: int, description: str):
        self.function = function
        self.code = code
        super().__init__(f"{function} failed with CUDA error {code}: {description}")


class CUuuid(ctypes.Structure):
    # `char bytes[16]` in cuda.h; unsigned here because ctypes cuts a char array at its first zero byte
    _fields_ = [("bytes", ctypes.c_ubyte * 16)]


class _Win32Handle(ctypes.Structure):
    _fields_ = [("handle", ctypes.c_void_p), ("name", ctypes.c_void_p)]


class _MemoryHandle(ctypes.Union):
    _fields_ = [("fd", ctypes.c_int), ("win32", _Win32Handle), ("nvSciBufObject", ctypes.c_void_p)]


class CUDA_EXTERNAL_MEMORY_HANDLE_DESC(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("handle", _MemoryHandle), ("size", ctypes.c_ulonglong),
                ("flags", ctypes.c_uint), ("reserved", ctypes.c_uint * 16)]


class CUDA_EXTERNAL_MEMORY_BUFFER_DESC(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_ulonglong), ("size", ctypes.c_ulonglong), ("flags", ctypes.c_uint),
                ("reserved", ctypes.c_uint * 16)]


class _SemaphoreHandle(ctypes.Union):
    _fields_ = [("fd", ctypes.c_int), ("win32", _Win32Handle), ("nvSciSyncObj", ctypes.c_void_p)]


class CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("handle", _SemaphoreHandle), ("flags", ctypes.c_uint),
                ("reserved", ctypes.c_uint * 16)]


class _Fence(ctypes.Structure):
    _fields_ = [("value", ctypes.c_ulonglong)]


class _NvSciSync(ctypes.Union):
    _fields_ = [("fence", ctypes.c_void_p), ("reserved", ctypes.c_ulonglong)]


class _SignalKeyedMutex(ctypes.Structure):
    _fields_ = [("key", ctypes.c_ulonglong)]


class _SignalParams(ctypes.Structure):
    _fields_ = [("fence", _Fence), ("nvSciSync", _NvSciSync), ("keyedMutex", _SignalKeyedMutex),
                ("reserved", ctypes.c_uint * 12)]


class CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS(ctypes.Structure):
    _fields_ = [("params", _SignalParams), ("flags", ctypes.c_uint), ("reserved", ctypes.c_uint * 16)]


class _WaitKeyedMutex(ctypes.Structure):
    _fields_ = [("key", ctypes.c_ulonglong), ("timeoutMs", ctypes.c_uint)]


class _WaitParams(ctypes.Structure):
    _fields_ = [("fence", _Fence), ("nvSciSync", _NvSciSync), ("keyedMutex", _WaitKeyedMutex),
                ("reserved", ctypes.c_uint * 10)]


class CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS(ctypes.Structure):
    _fields_ = [("params", _WaitParams), ("flags", ctypes.c_uint), ("reserved", ctypes.c_uint * 16)]


class CUDA_MEMCPY2D(ctypes.Structure):
    _fields_ = [("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t), ("srcMemoryType", ctypes.c_int),
                ("srcHost", ctypes.c_void_p), ("srcDevice", CUdeviceptr), ("srcArray", Handle),
                ("srcPitch", ctypes.c_size_t),
                ("dstXInBytes", ctypes.c_size_t), ("dstY", ctypes.c_size_t), ("dstMemoryType", ctypes.c_int),
                ("dstHost", ctypes.c_void_p), ("dstDevice", CUdeviceptr), ("dstArray", Handle),
                ("dstPitch", ctypes.c_size_t),
                ("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t)]


P = ctypes.POINTER
# name in cuda.h -> (symbol in libcuda, argument types); every function returns CUresult.
SIGNATURES = {
    "cuInit": ("cuInit", [ctypes.c_uint]),
    "cuGetErrorString": ("cuGetErrorString", [CUresult, P(ctypes.c_char_p)]),
    "cuDeviceGetCount": ("cuDeviceGetCount", [P(ctypes.c_int)]),
    "cuDeviceGet": ("cuDeviceGet", [P(CUdevice), ctypes.c_int]),
    "cuDeviceGetUuid": ("cuDeviceGetUuid_v2", [P(CUuuid), CUdevice]),
    "cuDevicePrimaryCtxRetain": ("cuDevicePrimaryCtxRetain", [P(Handle), CUdevice]),
    "cuCtxPushCurrent": ("cuCtxPushCurrent_v2", [Handle]),
    "cuCtxPopCurrent": ("cuCtxPopCurrent_v2", [P(Handle)]),
    "cuCtxSynchronize": ("cuCtxSynchronize", []),
    "cuPointerGetAttribute": ("cuPointerGetAttribute", [ctypes.c_void_p, ctypes.c_int, CUdeviceptr]),
    "cuImportExternalMemory": ("cuImportExternalMemory", [P(Handle), P(CUDA_EXTERNAL_MEMORY_HANDLE_DESC)]),
    "cuExternalMemoryGetMappedBuffer": ("cuExternalMemoryGetMappedBuffer",
                                        [P(CUdeviceptr), Handle, P(CUDA_EXTERNAL_MEMORY_BUFFER_DESC)]),
    "cuDestroyExternalMemory": ("cuDestroyExternalMemory", [Handle]),
    "cuMemFree": ("cuMemFree_v2", [CUdeviceptr]),
    "cuImportExternalSemaphore": ("cuImportExternalSemaphore",
                                  [P(Handle), P(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC)]),
    "cuSignalExternalSemaphoresAsync": ("cuSignalExternalSemaphoresAsync",
                                        [P(Handle), P(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS), ctypes.c_uint,
                                         Handle]),
    "cuWaitExternalSemaphoresAsync": ("cuWaitExternalSemaphoresAsync",
                                      [P(Handle), P(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS), ctypes.c_uint, Handle]),
    "cuDestroyExternalSemaphore": ("cuDestroyExternalSemaphore", [Handle]),
    "cuMemcpyDtoDAsync": ("cuMemcpyDtoDAsync_v2", [CUdeviceptr, CUdeviceptr, ctypes.c_size_t, Handle]),
    "cuMemcpy2DAsync": ("cuMemcpy2DAsync_v2", [P(CUDA_MEMCPY2D), Handle]),
    "cuStreamWaitValue32": ("cuStreamWaitValue32_v2", [Handle, CUdeviceptr, ctypes.c_uint32, ctypes.c_uint]),
}


class CudaDriver:
    """The bound functions of one loaded driver library, called through typed methods that check every result."""

    def __init__(self, library):
        self._functions = {}
        for name, (symbol, argtypes) in SIGNATURES.items():
            try:
                function = getattr(library, symbol)
            except AttributeError:
                raise BackendUnavailableError(
                    f"{LIBRARY} lacks {symbol}: the NVIDIA driver is too old for Vulkan interop (CUDA 11.4 or later "
                    f"is needed)") from None
            function.argtypes = argtypes
            function.restype = CUresult
            self._functions[name] = function
        self._primary_contexts: dict[int, int] = {}
        self._lock = threading.Lock()
        result = self._functions["cuInit"](0)
        if result == CUDA_ERROR_NO_DEVICE:
            raise BackendUnavailableError(f"the CUDA driver reports no device ({self._describe(result)})")
        self._check("cuInit", result)

    def _describe(self, result: int) -> str:
        text = ctypes.c_char_p()
        if self._functions["cuGetErrorString"](result, ctypes.byref(text)) != CUDA_SUCCESS or not text.value:
            return "unknown error"
        return text.value.decode(errors="replace")

    def _check(self, name: str, result: int) -> None:
        if result != CUDA_SUCCESS:
            raise CudaError(name, result, self._describe(result))

    def _call(self, name: str, *args) -> None:
        self._check(name, self._functions[name](*args))

    # devices and contexts

    def device_count(self) -> int:
        count = ctypes.c_int()
        self._call("cuDeviceGetCount", ctypes.byref(count))
        return count.value

    def device_uuid(self, ordinal: int) -> str:
        """The device's UUID as 32 hex digits, as Vulkan's deviceUUID (`DeviceInfo.device_uuid`) spells it."""
        device = CUdevice()
        self._call("cuDeviceGet", ctypes.byref(device), ordinal)
        uuid = CUuuid()
        self._call("cuDeviceGetUuid", ctypes.byref(uuid), device)
        return bytes(uuid.bytes).hex()

    def ordinal_of_uuid(self, uuid_hex: str) -> int | None:
        """The CUDA ordinal of the device with this UUID, or None when CUDA does not see it."""
        return next((i for i in range(self.device_count()) if self.device_uuid(i) == uuid_hex.lower()), None)

    def primary_context(self, ordinal: int) -> int:
        """The device's primary context (the one PyTorch and CuPy use), retained once for the process's lifetime:
        outputs that outlive every model still free their memory in it."""
        with self._lock:
            if ordinal not in self._primary_contexts:
                device = CUdevice()
                self._call("cuDeviceGet", ctypes.byref(device), ordinal)
                context = Handle()
                self._call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
                self._primary_contexts[ordinal] = context.value
            return self._primary_contexts[ordinal]

    @contextlib.contextmanager
    def current(self, context: int) -> Iterator[None]:
        """Make `context` current on this thread for the block, restoring the previous one after."""
        self._call("cuCtxPushCurrent", context)
        try:
            yield
        finally:
            popped = Handle()
            self._call("cuCtxPopCurrent", ctypes.byref(popped))

    def synchronize(self) -> None:
        """Wait until all work of the current context is done."""
        self._call("cuCtxSynchronize")

    def pointer_device(self, pointer: int) -> int:
        """The ordinal of the device holding `pointer`."""
        ordinal = ctypes.c_int()
        self._call("cuPointerGetAttribute", ctypes.byref(ordinal), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer)
        return ordinal.value

    # external memory

    def import_memory(self, fd: int, size: int, dedicated: bool) -> int:
        """Import an opaque fd of `size` bytes (the whole allocation); on success CUDA owns the fd."""
        desc = CUDA_EXTERNAL_MEMORY_HANDLE_DESC(type=CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD, size=size,
                                                flags=CUDA_EXTERNAL_MEMORY_DEDICATED if dedicated else 0)
        desc.handle.fd = fd
        memory = Handle()
        self._call("cuImportExternalMemory", ctypes.byref(memory), ctypes.byref(desc))
        return memory.value

    def map_buffer(self, memory: int, offset: int, size: int) -> int:
        """A device pointer to `size` bytes at `offset` of imported memory (freed with `free`)."""
        desc = CUDA_EXTERNAL_MEMORY_BUFFER_DESC(offset=offset, size=size, flags=0)
        pointer = CUdeviceptr()
        self._call("cuExternalMemoryGetMappedBuffer", ctypes.byref(pointer), memory, ctypes.byref(desc))
        return pointer.value

    def destroy_memory(self, memory: int) -> None:
        self._call("cuDestroyExternalMemory", memory)

    def free(self, pointer: int) -> None:
        self._call("cuMemFree", pointer)

    # external semaphores

    def import_timeline(self, fd: int) -> int:
        """Import a Vulkan timeline semaphore's opaque fd; on success CUDA owns the fd."""
        desc = CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC(type=CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
                                                   flags=0)
        desc.handle.fd = fd
        semaphore = Handle()
        self._call("cuImportExternalSemaphore", ctypes.byref(semaphore), ctypes.byref(desc))
        return semaphore.value

    def destroy_semaphore(self, semaphore: int) -> None:
        self._call("cuDestroyExternalSemaphore", semaphore)

    def signal(self, semaphore: "SemaphoreArgs", value: int, stream: int) -> None:
        """Set the timeline to `value` once the work queued on `stream` so far is done."""
        semaphore.signal_params[0].params.fence.value = value
        self._call("cuSignalExternalSemaphoresAsync", semaphore.handles, semaphore.signal_params, 1, stream)

    def wait(self, semaphore: "SemaphoreArgs", value: int, stream: int) -> None:
        """Hold back later work on `stream` until the timeline reaches `value`."""
        semaphore.wait_params[0].params.fence.value = value
        self._call("cuWaitExternalSemaphoresAsync", semaphore.handles, semaphore.wait_params, 1, stream)

    def wait_value(self, pointer: int, value: int, stream: int) -> None:
        """Hold back later work on `stream` until the 32-bit word at `pointer` is at least `value` (the stream polls
        memory: `bench/torch_handoff.py` times it against the semaphore wait)."""
        self._call("cuStreamWaitValue32", stream, pointer, value, CU_STREAM_WAIT_VALUE_GEQ)

    # copies

    def copy(self, destination: int, source: int, nbytes: int, stream: int) -> None:
        self._call("cuMemcpyDtoDAsync", destination, source, nbytes, stream)

    def copy_rows(self, destination: int, source: int, row_bytes: int, rows: int, source_pitch: int,
                  stream: int) -> None:
        """Copy `rows` rows of `row_bytes` bytes from rows `source_pitch` bytes apart into packed rows (one linear
        copy where the source rows are packed too)."""
        if source_pitch == row_bytes:
            self.copy(destination, source, row_bytes * rows, stream)
            return
        copy = CUDA_MEMCPY2D(srcMemoryType=CU_MEMORYTYPE_DEVICE, srcDevice=source, srcPitch=source_pitch,
                             dstMemoryType=CU_MEMORYTYPE_DEVICE, dstDevice=destination, dstPitch=row_bytes,
                             WidthInBytes=row_bytes, Height=rows)
        self._call("cuMemcpy2DAsync", ctypes.byref(copy), stream)


class SemaphoreArgs:
    """Prebuilt argument arrays for signalling and waiting on one imported semaphore, so a run allocates none."""

    def __init__(self, semaphore: int):
        self.handles = (Handle * 1)(semaphore)
        self.signal_params = (CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS * 1)()
        self.wait_params = (CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS * 1)()


@functools.lru_cache(maxsize=1)
def cuda_driver() -> CudaDriver:
    """The process's CUDA driver, loaded and initialised on first use (BackendUnavailableError without one)."""
    try:
        library = ctypes.CDLL(LIBRARY)
    except OSError as exc:
        raise BackendUnavailableError(
            f"the CUDA driver library {LIBRARY} could not be loaded ({exc}); CUDA tensors need an NVIDIA driver"
        ) from exc
    return CudaDriver(library)
