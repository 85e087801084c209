"""The CUDA driver bindings (`coopnn/interop/cuda_driver.py`) without an NVIDIA GPU: struct layouts pinned against
cuda.h, errors, device matching and a missing driver, on a stand-in for libcuda."""

from __future__ import annotations

import ctypes

import pytest

from coopnn.errors import BackendUnavailableError
from coopnn.interop import cuda_driver

# (size, {field: offset}) of each struct, as gcc lays out the definitions of CUDA 12's cuda.h on x86-64.
CUDA_LAYOUTS = {
    "CUDA_EXTERNAL_MEMORY_HANDLE_DESC": (104, {"handle": 8, "size": 24, "flags": 32, "reserved": 36}),
    "CUDA_EXTERNAL_MEMORY_BUFFER_DESC": (88, {"offset": 0, "size": 8, "flags": 16, "reserved": 20}),
    "CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC": (96, {"handle": 8, "flags": 24, "reserved": 28}),
    "CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS": (144, {"params": 0, "flags": 72, "reserved": 76}),
    "CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS": (144, {"params": 0, "flags": 72, "reserved": 76}),
    "CUDA_MEMCPY2D": (128, {"srcMemoryType": 16, "srcHost": 24, "srcDevice": 32, "srcPitch": 48,
                            "dstMemoryType": 72, "dstDevice": 88, "dstPitch": 104, "WidthInBytes": 112,
                            "Height": 120}),
}


@pytest.mark.parametrize("name", sorted(CUDA_LAYOUTS))
def test_cuda_struct_layouts_match_cuda_h(name):
    size, offsets = CUDA_LAYOUTS[name]
    struct = getattr(cuda_driver, name)
    assert ctypes.sizeof(struct) == size
    assert {field: getattr(struct, field).offset for field in offsets} == offsets


def test_semaphore_parameter_unions_and_keyed_mutex_offsets():
    for params in (cuda_driver._SignalParams, cuda_driver._WaitParams):
        assert ctypes.sizeof(params) == 72
        assert (params.fence.offset, params.nvSciSync.offset, params.keyedMutex.offset) == (0, 8, 16)
    assert cuda_driver._WaitKeyedMutex.timeoutMs.offset == 8


class FakeLibcuda:
    """A stand-in for libcuda: every function succeeds, except those named in `failing` (with their CUresult)."""

    MESSAGE = ctypes.create_string_buffer(b"the stand-in failed on purpose")

    def __init__(self, failing=None, missing=(), uuids=()):
        self.failing = failing or {}
        self.uuids = list(uuids)
        for _, (symbol, _) in cuda_driver.SIGNATURES.items():
            if symbol not in missing:
                setattr(self, symbol, self._function(symbol))

    def _function(self, symbol):
        def function(*args):
            if symbol == "cuGetErrorString":
                args[1]._obj.value = ctypes.addressof(self.MESSAGE)
            elif symbol == "cuDeviceGetCount":
                args[0]._obj.value = len(self.uuids)
            elif symbol == "cuDeviceGet":
                args[0]._obj.value = args[1]
            elif symbol == "cuDeviceGetUuid_v2":
                uuid = args[0]._obj
                uuid.bytes[:] = list(bytes.fromhex(self.uuids[args[1].value]))
            return self.failing.get(symbol, 0)

        return function


def test_a_failing_call_names_the_function_and_cudas_error_string():
    driver = cuda_driver.CudaDriver(FakeLibcuda(failing={"cuMemFree_v2": 700}))
    with pytest.raises(cuda_driver.CudaError, match="cuMemFree failed with CUDA error 700: the stand-in failed on "
                                                    "purpose") as raised:
        driver.free(0x1000)
    assert (raised.value.function, raised.value.code) == ("cuMemFree", 700)


def test_semaphore_signals_and_waits_pass_the_timeline_value_and_stream():
    seen = []
    library = FakeLibcuda()
    library.cuSignalExternalSemaphoresAsync = lambda handles, params, count, stream: seen.append(
        ("signal", handles[0], params[0].params.fence.value, count, stream)) or 0
    library.cuWaitExternalSemaphoresAsync = lambda handles, params, count, stream: seen.append(
        ("wait", handles[0], params[0].params.fence.value, count, stream)) or 0
    driver = cuda_driver.CudaDriver(library)
    semaphore = cuda_driver.SemaphoreArgs(0x5E)
    driver.signal(semaphore, 41, stream=0xAB)
    driver.wait(semaphore, 42, stream=0xCD)
    assert seen == [("signal", 0x5E, 41, 1, 0xAB), ("wait", 0x5E, 42, 1, 0xCD)]


def test_packed_rows_are_copied_linearly_and_padded_rows_in_two_dimensions():
    seen = []
    library = FakeLibcuda()
    library.cuMemcpyDtoDAsync_v2 = lambda destination, source, nbytes, stream: seen.append(
        ("linear", destination, source, nbytes, stream)) or 0
    library.cuMemcpy2DAsync_v2 = lambda copy, stream: seen.append(
        ("2d", copy._obj.dstDevice, copy._obj.srcDevice, copy._obj.srcPitch, copy._obj.dstPitch,
         copy._obj.WidthInBytes, copy._obj.Height, stream)) or 0
    driver = cuda_driver.CudaDriver(library)
    driver.copy_rows(0xD000, 0x5000, row_bytes=12, rows=10, source_pitch=12, stream=7)
    driver.copy_rows(0xD000, 0x5000, row_bytes=12, rows=10, source_pitch=16, stream=7)
    assert seen == [("linear", 0xD000, 0x5000, 120, 7), ("2d", 0xD000, 0x5000, 16, 12, 12, 10, 7)]


def test_devices_are_matched_by_uuid_zero_bytes_included():
    uuids = ["00112233445566778899aabbccddeeff", "ff00ee00dd00cc00bb00aa0099008800"]
    driver = cuda_driver.CudaDriver(FakeLibcuda(uuids=uuids))
    assert driver.device_uuid(0) == uuids[0]
    assert driver.ordinal_of_uuid(uuids[1].upper()) == 1
    assert driver.ordinal_of_uuid("0" * 32) is None


def test_a_driver_without_devices_or_symbols_is_unavailable():
    with pytest.raises(BackendUnavailableError, match="no device"):
        cuda_driver.CudaDriver(FakeLibcuda(failing={"cuInit": cuda_driver.CUDA_ERROR_NO_DEVICE}))
    with pytest.raises(BackendUnavailableError, match="lacks cuImportExternalSemaphore"):
        cuda_driver.CudaDriver(FakeLibcuda(missing={"cuImportExternalSemaphore"}))


def test_a_missing_libcuda_is_unavailable(monkeypatch):
    monkeypatch.setattr(cuda_driver, "LIBRARY", "libcuda-that-does-not-exist.so.1")
    cuda_driver.cuda_driver.cache_clear()
    try:
        with pytest.raises(BackendUnavailableError, match="libcuda-that-does-not-exist.so.1 could not be loaded"):
            cuda_driver.cuda_driver()
    finally:
        cuda_driver.cuda_driver.cache_clear()
