"""What of the CUDA interop runs without an NVIDIA GPU: recognising CUDA arrays and reading their interface, the CUDA
driver bindings (struct layouts pinned against cuda.h, errors, a missing driver) on a stand-in library, and the
Vulkan side (exported buffers, the output pool) on any Vulkan device with VK_KHR_external_memory_fd, with a stand-in
for CUDA's side. `tests/gpu/test_cuda_interop.py` runs the whole path on an NVIDIA GPU."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import subprocess
import sys

import numpy as np
import pytest

from coopnn.errors import BackendUnavailableError, InputError
from coopnn.interop import cuda_driver, tensors
from coopnn.interop.tensors import as_cuda_input, is_cuda_array

# ---------------------------------------------------------------------------------------------- recognising arrays


class FakeCudaArray:
    """Something exposing `__cuda_array_interface__` (no memory behind it: only read, never dereferenced)."""

    def __init__(self, shape, typestr="<f4", strides=None, stream=None, pointer=0x7F0000000000, **extra):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (pointer, False),
                                         "strides": strides, "version": 3, "stream": stream, **extra}


class FakeDLPack:
    def __init__(self, device_type, raises=False):
        self.device_type = device_type
        self.raises = raises

    def __dlpack_device__(self):
        if self.raises:
            raise RuntimeError("no device")
        return (self.device_type, 0)


def test_numpy_arrays_and_plain_objects_are_not_cuda_arrays():
    assert not is_cuda_array(np.zeros((4, 3), np.float32))  # numpy has __dlpack_device__, on the CPU
    assert not is_cuda_array([1.0, 2.0])
    assert not is_cuda_array(None)
    assert not is_cuda_array(FakeCudaArray)  # the class, not an instance


def test_interface_and_dlpack_producers_on_cuda_are_cuda_arrays():
    assert is_cuda_array(FakeCudaArray((4, 3)))
    assert is_cuda_array(FakeDLPack(2))
    assert not is_cuda_array(FakeDLPack(1))
    assert not is_cuda_array(FakeDLPack(2, raises=True))


def test_torch_cpu_tensors_are_not_cuda_arrays():
    torch = pytest.importorskip("torch")
    assert not is_cuda_array(torch.zeros(4, 3))
    with pytest.raises(InputError, match="input 'x' is a tensor on cpu"):
        as_cuda_input("x", torch.zeros(4, 3), (3,), "f32")


def test_importing_coopnn_and_its_interop_loads_no_framework_driver_or_vulkan():
    code = ("import sys, coopnn, coopnn.interop; coopnn.interop.is_cuda_array(object()); "
            "print(sorted(m for m in ('torch', 'cupy', 'vulkan') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------------------------------ reading the interface


def test_packed_rows_are_read_in_place_on_the_interface_stream():
    given = as_cuda_input("x", FakeCudaArray((10, 3), stream=0xABC), (3,), "f32")
    assert (given.pointer, given.rows, given.row_bytes, given.pitch) == (0x7F0000000000, 10, 12, 12)
    assert given.stream == 0xABC and given.framework == "other" and given.device is None


def test_interface_streams_map_to_driver_handles():
    def stream_of(stream):
        return as_cuda_input("x", FakeCudaArray((2, 3), stream=stream), (3,), "f32").stream

    assert stream_of(None) == tensors.CU_STREAM_LEGACY
    assert stream_of(1) == tensors.CU_STREAM_LEGACY
    assert stream_of(2) == tensors.CU_STREAM_PER_THREAD
    with pytest.raises(InputError, match="stream 0"):
        stream_of(0)


def test_padded_rows_keep_their_pitch_and_trailing_axes_must_be_packed():
    column_slice = FakeCudaArray((10, 3), strides=(32, 4))  # x[:, :3] of a (10, 8) float32 array
    assert as_cuda_input("x", column_slice, (3,), "f32").pitch == 32
    grid = FakeCudaArray((5, 2, 3), strides=(24, 12, 4))
    assert as_cuda_input("x", grid, (2, 3), "f32").row_bytes == 24


def test_interface_inputs_needing_a_conversion_need_pytorch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails
    for array in (FakeCudaArray((10, 3), typestr="<f8"),                 # float64: converted
                  FakeCudaArray((10, 3), strides=(4, 40))):              # column-major: made contiguous
        with pytest.raises(InputError, match="input 'x' needs PyTorch to convert it"):
            as_cuda_input("x", array, (3,), "f32")
    with pytest.raises(InputError, match="needs PyTorch to read its DLPack capsule"):
        as_cuda_input("x", FakeDLPack(2), (3,), "f32")


def test_input_errors_name_the_input():
    with pytest.raises(InputError, match=r"input 'xyz' has shape \[10, 4\]; expected \[batch, 3\]"):
        as_cuda_input("xyz", FakeCudaArray((10, 4)), (3,), "f32")
    with pytest.raises(InputError, match=r"add a batch axis"):
        as_cuda_input("xyz", FakeCudaArray((3,)), (3,), "f32")
    with pytest.raises(InputError, match="input 'xyz' has dtype <i4; supported: float16, float32, float64"):
        as_cuda_input("xyz", FakeCudaArray((10, 3), typestr="<i4"), (3,), "f32")
    with pytest.raises(InputError, match="masked"):
        as_cuda_input("xyz", FakeCudaArray((10, 3), mask=object()), (3,), "f32")
    with pytest.raises(InputError, match="not a CUDA array"):
        as_cuda_input("xyz", np.zeros((10, 3), np.float32), (3,), "f32")


def test_outputs_without_pytorch_are_the_bridge_object_with_its_stream(monkeypatch):
    pytest.importorskip("vulkan")
    from coopnn.interop.cuda_bridge import CudaOutput

    monkeypatch.setitem(sys.modules, "torch", None)
    output = CudaOutput(0x1000, (5, 4), "<f4")
    assert "stream" not in output.__cuda_array_interface__
    returned = tensors.wrap_output(output, "other", 0, tensors.CU_STREAM_LEGACY, is_bool=False)
    assert returned is output
    assert output.__cuda_array_interface__ == {"shape": (5, 4), "typestr": "<f4", "data": (0x1000, False),
                                               "strides": None, "version": 3, "stream": 1}
    assert output.nbytes == 80


# -------------------------------------------------------------------------------------------- CUDA driver bindings

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


# ----------------------------------------------------------------------- the Vulkan side, with CUDA's stood in for


@pytest.fixture
def export_context():
    """A context with VK_KHR_external_memory_fd (and the validation layer when installed)."""
    from tests.vulkan.runtime.conftest import validation_off_reason, vulkan_skip_reason

    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)
    from coopnn.runtime.vk.context import VulkanContext, list_devices

    if not any("VK_KHR_external_memory_fd" in d.extensions for d in list_devices()):
        pytest.skip("no Vulkan device lists VK_KHR_external_memory_fd")
    context = VulkanContext(extensions={"VK_KHR_external_memory_fd"}, validation=validation_off_reason() is None)
    yield context
    messages = list(context.debug_messages)
    context.close()
    assert messages == []


class FakeCudaSide:
    """Stands in for the CUDA driver where the bridge's buffers meet it: imports close the fd, as CUDA owns it."""

    def __init__(self):
        self.mapped: dict[int, int] = {}  # pointer -> external memory handle
        self.events: list[str] = []
        self._next = 1

    def import_memory(self, fd, size, dedicated):
        assert dedicated and size > 0
        os.fstat(fd)  # a real, open file descriptor
        os.close(fd)
        self._next += 1
        return self._next

    def map_buffer(self, memory, offset, size):
        pointer = memory << 32
        self.mapped[pointer] = memory
        return pointer

    def free(self, pointer):
        self.events.append("free")
        del self.mapped[pointer]

    def destroy_memory(self, memory):
        self.events.append("destroy")

    def synchronize(self):
        self.events.append("synchronize")

    @contextlib.contextmanager
    def current(self, context):
        yield


def test_exported_buffers_bind_like_buffers_and_are_tracked(export_context):
    from coopnn.interop.vk_export import ExportedBuffer

    before = export_context.live_objects()
    buffer = ExportedBuffer(export_context, 1000)
    assert buffer.size == 1000 and buffer.allocation_size >= 1000 and buffer.alive
    assert buffer.serial != ExportedBuffer(export_context, 16).serial
    fd = buffer.export_fd()
    try:
        os.fstat(fd)
    finally:
        os.close(fd)
    gc.collect()  # the second buffer above is gone
    buffer.destroy()
    buffer.destroy()
    assert not buffer.alive and export_context.live_objects() == before


def test_a_context_without_semaphore_export_is_refused_with_the_reason(export_context):
    from coopnn.interop.vk_export import interop_unavailable_reason

    reason = interop_unavailable_reason(export_context)
    assert reason is not None and "VK_KHR_external_semaphore_fd" in reason


def _pool(context, driver):
    from coopnn.interop.cuda_bridge import OutputPool

    return OutputPool(context, driver, cuda_context=0, bindable_limit=1 << 20)


def test_pooled_outputs_are_reused_on_their_stream_only(export_context):
    driver = FakeCudaSide()
    pool = _pool(export_context, driver)
    first = pool.lend(1000, stream=7, bindable=True)
    output = pool.output(first, (250,), "<f4", stream=7)
    assert output.__cuda_array_interface__["data"] == (first.pointer, False)
    assert pool.counts() == {"idle": 0, "lent": 1}
    del output
    gc.collect()
    assert pool.counts() == {"idle": 1, "lent": 0}
    pool.reclaim()
    other_stream = pool.lend(1000, stream=8, bindable=True)
    assert other_stream is not first
    assert pool.lend(900, stream=7, bindable=True) is first
    assert first.size == 1 << 16  # rounded up: small batches of any size share it


def test_idle_buffers_beyond_the_limit_are_freed_after_cuda_is_done(export_context):
    from coopnn.interop.cuda_bridge import IDLE_LIMIT

    driver = FakeCudaSide()
    pool = _pool(export_context, driver)
    buffers = [pool.lend(4096, stream=1, bindable=True) for _ in range(IDLE_LIMIT + 2)]
    for buffer in buffers:
        pool.take_back(buffer, stream=1)
    live = export_context.live_objects()["VkBuffer"]
    pool.reclaim()
    assert driver.events == ["synchronize"] + ["free", "destroy"] * 2
    assert pool.counts()["idle"] == IDLE_LIMIT
    assert export_context.live_objects()["VkBuffer"] == live - 2


def test_closing_the_pool_leaves_live_outputs_their_memory(export_context):
    driver = FakeCudaSide()
    pool = _pool(export_context, driver)
    kept = pool.output(pool.lend(4096, stream=1, bindable=True), (1024,), "<f4", stream=1)
    pool.take_back(pool.lend(4096, stream=1, bindable=True), stream=1)
    buffers = export_context.live_objects()["VkBuffer"]
    pool.close()
    # the idle buffer is freed on both sides; the live output's Vulkan side goes, its CUDA mapping stays
    assert driver.events == ["free", "destroy"]
    assert export_context.live_objects().get("VkBuffer", 0) == buffers - 2
    assert kept.pointer in driver.mapped
    del kept
    gc.collect()
    assert driver.events == ["free", "destroy", "synchronize", "free", "destroy"]
    assert driver.mapped == {}
