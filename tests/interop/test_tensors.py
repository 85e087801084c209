"""Recognising CUDA arrays, reading their interface and wrapping outputs (`coopnn/interop/tensors.py`), with stand-ins
for arrays: nothing here needs an NVIDIA GPU. `tests/interop/test_cuda_interop.py` runs the whole path on one."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from coopnn.errors import InputError
from coopnn.interop import tensors
from coopnn.interop.tensors import KDL_CUDA, as_cuda_input, is_cuda_array, is_float16
from tests.conftest import import_torch

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
    torch = import_torch()
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
    from coopnn.interop.output_pool import CudaOutput

    monkeypatch.setitem(sys.modules, "torch", None)
    output = CudaOutput(0x1000, (5, 4), "<f4")
    assert "stream" not in output.__cuda_array_interface__
    returned = tensors.wrap_output(output, "other", 0, tensors.CU_STREAM_LEGACY, is_bool=False)
    assert returned is output
    assert output.__cuda_array_interface__ == {"shape": (5, 4), "typestr": "<f4", "data": (0x1000, False),
                                               "strides": None, "version": 3, "stream": 1}
    assert output.nbytes == 80


def test_float16_arrays_are_told_apart_by_their_element_type():
    torch = import_torch()
    assert is_float16(FakeCudaArray((4, 3), typestr="<f2"))
    assert not is_float16(FakeCudaArray((4, 3)))
    assert not is_float16(FakeDLPack(KDL_CUDA))
    assert is_float16(torch.zeros(2, dtype=torch.float16)) and not is_float16(torch.zeros(2))
