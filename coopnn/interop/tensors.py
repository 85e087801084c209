"""CUDA arrays of other frameworks as the CUDA bridge takes and returns them: recognising them, checking and converting
inputs, and handing outputs back in the caller's framework.

Recognised (`is_cuda_array`): PyTorch CUDA tensors, any object with `__cuda_array_interface__` (CuPy, Numba, JAX,
...), and DLPack producers whose `__dlpack_device__()` is CUDA (kDLCUDA = 2). No framework is imported with this
module: PyTorch and CuPy are looked up in `sys.modules` (an array of theirs exists only once they are imported), and
PyTorch is imported on demand only to read DLPack-only producers or to return outputs for producers other than
PyTorch and CuPy.

Inputs are float32, float16 or float64 of shape [batch, *features]; anything else raises InputError naming the input.
The kernel reads packed rows of its own element type (`Binding.dtype`), so an input of another dtype, or whose rows are
not evenly spaced, is converted on the GPU by its own framework (`t.to(dtype)` / `.contiguous()` in PyTorch, `astype`
/ `ascontiguousarray` in CuPy). Evenly spaced but padded rows (a column slice) are copied as they are, by a 2D copy.
An interface-only producer needing a conversion goes through PyTorch (InputError when it is not importable). The data
is read on the stream the caller works on: PyTorch's or CuPy's current stream, or the interface's `stream`.

Outputs: PyTorch in, PyTorch out; CuPy in, CuPy out; any other producer, PyTorch when importable, else the bridge's
output object itself, which exposes `__cuda_array_interface__` (version 3, with its stream; no `__dlpack__`) in the
kernel's element type, boolean outputs as 0/1. Outputs are float32 but where every input was float16 (`is_float16`)
and the model has a float16-I/O kernel: then the kernel reads and writes float16 and the outputs stay float16.
Outputs view memory the bridge owns, without a copy; the returned array keeps that memory alive (PyTorch and CuPy
hold the output object).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from coopnn.errors import InputError

KDL_CUDA = 2  # DLPack's DLDeviceType for CUDA memory
CU_STREAM_LEGACY = 0  # the driver API's handle of the legacy default stream
CU_STREAM_PER_THREAD = 2
ACCEPTED_TYPESTRS = {"<f4": 4, "<f2": 2, "<f8": 8}
KERNEL_TYPESTRS = {"f32": "<f4", "f16": "<f2"}


@dataclass(frozen=True)
class CudaInput:
    """One input ready to copy: `rows` rows of `row_bytes` bytes at `pointer`, `pitch` bytes apart, readable once the
    work queued on `stream` is done; `keep` holds whatever converted array owns the memory until the copy is queued."""

    pointer: int
    rows: int
    row_bytes: int
    pitch: int
    device: int | None  # CUDA ordinal, None when only the driver can tell (interface producers)
    stream: int
    framework: str  # "torch", "cupy" or "other"
    keep: Any


def rows_of(value: Any) -> int:
    """Samples (rows) in `value`: a `CudaInput`, or an array of samples on the host or a device."""
    return value.rows if isinstance(value, CudaInput) else len(value)


def _torch_tensor_class():
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None) if torch is not None else None


def _cupy_array_class():
    cupy = sys.modules.get("cupy")
    return getattr(cupy, "ndarray", None) if cupy is not None else None


def _dlpack_device_type(x: Any) -> int | None:
    device = getattr(x, "__dlpack_device__", None)
    if not callable(device):
        return None
    try:
        return int(device()[0])
    except Exception:
        return None


def is_cuda_array(x: Any) -> bool:
    """Whether `x` is an array in CUDA device memory that the CUDA bridge can read (see the module docstring)."""
    if isinstance(x, np.ndarray):  # the common case, answered without looking for frameworks
        return False
    tensor = _torch_tensor_class()
    if tensor is not None and isinstance(x, tensor):
        return bool(x.is_cuda)
    if isinstance(x, type):
        return False
    try:
        if getattr(x, "__cuda_array_interface__", None) is not None:
            return True
    except Exception:
        return False
    return _dlpack_device_type(x) == KDL_CUDA


def framework_of(x: Any) -> str:
    """"torch", "cupy" or "other": the framework outputs are returned in for an input `x`."""
    tensor, array = _torch_tensor_class(), _cupy_array_class()
    if tensor is not None and isinstance(x, tensor):
        return "torch"
    if array is not None and isinstance(x, array):
        return "cupy"
    return "other"


def _check_shape(name: str, shape: tuple, features: tuple[int, ...]) -> int:
    if len(shape) != len(features) + 1 or tuple(shape[1:]) != tuple(features):
        want = "[batch, " + ", ".join(str(d) for d in features) + "]"
        hint = " (add a batch axis: x[None])" if tuple(shape) == tuple(features) else ""
        raise InputError(f"input {name!r} has shape {list(shape)}; expected {want}{hint}")
    return int(shape[0])


def _dtype_error(name: str, dtype) -> InputError:
    return InputError(f"input {name!r} has dtype {dtype}; supported: float16, float32, float64")


def as_cuda_input(name: str, x: Any, features: tuple[int, ...], kernel_dtype: str) -> CudaInput:
    """`x` checked against the feature shape and converted (on the GPU, where needed) to packed or evenly spaced rows
    of `kernel_dtype` ("f32" or "f16")."""
    kind = framework_of(x)
    if kind == "torch":
        return _torch_input(name, x, features, kernel_dtype, "torch")
    if kind == "cupy":
        return _cupy_input(name, x, features, kernel_dtype)
    try:
        interface = getattr(x, "__cuda_array_interface__", None)
    except Exception as exc:
        raise InputError(f"input {name!r}: reading its __cuda_array_interface__ failed: {exc}") from None
    if interface is not None:
        direct = _interface_input(name, interface, features, kernel_dtype)
        if direct is not None:
            return direct
        torch = _import_torch(name, "convert it")
        stream = _interface_stream(name, interface)
        # converted on the producer's stream, which the copy then follows
        producer = torch.cuda.default_stream() if stream == CU_STREAM_LEGACY else torch.cuda.ExternalStream(stream)
        with torch.cuda.stream(producer):
            return _torch_input(name, torch.as_tensor(x), features, kernel_dtype, "other")
    if _dlpack_device_type(x) == KDL_CUDA:
        return _torch_input(name, _import_torch(name, "read its DLPack capsule").from_dlpack(x), features,
                            kernel_dtype, "other")
    raise InputError(f"input {name!r} ({type(x).__name__}) is not a CUDA array")


def _import_torch(name: str, why: str):
    try:
        import torch
    except ImportError:
        raise InputError(f"input {name!r} needs PyTorch to {why}; install torch, or pass packed float32 rows "
                         f"through __cuda_array_interface__") from None
    return torch


def _torch_input(name: str, t, features: tuple[int, ...], kernel_dtype: str, framework: str) -> CudaInput:
    torch = sys.modules["torch"]
    if not t.is_cuda:
        raise InputError(f"input {name!r} is a tensor on {t.device}, not on a CUDA device")
    if t.dtype not in (torch.float32, torch.float16, torch.float64):
        raise _dtype_error(name, t.dtype)
    rows = _check_shape(name, tuple(t.shape), features)
    row_length = math.prod(features)
    wanted = torch.float32 if kernel_dtype == "f32" else torch.float16
    flat = t.detach().reshape(rows, row_length)
    if flat.dtype != wanted:
        flat = flat.to(wanted)
    # a 2D copy takes rows a fixed number of elements apart, packed within
    if (row_length > 1 and flat.stride(1) != 1) or (rows > 1 and flat.stride(0) < row_length):
        flat = flat.contiguous()
    itemsize = flat.element_size()
    row_bytes = row_length * itemsize
    pitch = flat.stride(0) * itemsize if rows > 1 else row_bytes
    stream = torch.cuda.current_stream(flat.device).cuda_stream
    return CudaInput(flat.data_ptr(), rows, row_bytes, pitch, flat.device.index, stream, framework, flat)


def _cupy_input(name: str, x, features: tuple[int, ...], kernel_dtype: str) -> CudaInput:
    cupy = sys.modules["cupy"]
    if x.dtype.str not in ACCEPTED_TYPESTRS:
        raise _dtype_error(name, x.dtype)
    rows = _check_shape(name, tuple(x.shape), features)
    row_length = math.prod(features)
    flat = x.reshape(rows, row_length)
    wanted = KERNEL_TYPESTRS[kernel_dtype]
    if flat.dtype.str != wanted:
        flat = flat.astype(wanted)
    itemsize = flat.dtype.itemsize
    row_bytes = row_length * itemsize
    if (row_length > 1 and flat.strides[1] != itemsize) or (rows > 1 and flat.strides[0] < row_bytes):
        flat = cupy.ascontiguousarray(flat)
    pitch = flat.strides[0] if rows > 1 else row_bytes
    stream = cupy.cuda.get_current_stream().ptr
    return CudaInput(flat.data.ptr, rows, row_bytes, pitch, flat.device.id, stream, "cupy", flat)


def _interface_stream(name: str, interface: dict) -> int:
    """The driver-API stream handle for the interface's `stream` entry (version 3 of the protocol)."""
    stream = interface.get("stream")
    if stream is None:
        return CU_STREAM_LEGACY
    if stream == 0:
        raise InputError(f"input {name!r}: __cuda_array_interface__ has stream 0, which the protocol forbids")
    return {1: CU_STREAM_LEGACY, 2: CU_STREAM_PER_THREAD}.get(int(stream), int(stream))


def _interface_input(name: str, interface: dict, features: tuple[int, ...], kernel_dtype: str) -> CudaInput | None:
    """The input read straight from the interface when its dtype is the kernel's and its rows are evenly spaced; None
    when it needs a conversion."""
    typestr = interface.get("typestr")
    if typestr not in ACCEPTED_TYPESTRS:
        raise _dtype_error(name, typestr)
    if interface.get("mask") is not None:
        raise InputError(f"input {name!r}: masked arrays are not supported")
    rows = _check_shape(name, tuple(interface["shape"]), features)
    if typestr != KERNEL_TYPESTRS[kernel_dtype]:
        return None
    itemsize = ACCEPTED_TYPESTRS[typestr]
    row_bytes = math.prod(features) * itemsize
    pitch = row_bytes
    strides = interface.get("strides")
    if strides is not None:
        # axes of length 1 may have any stride; the others must be packed within a row
        packed = all(s == p for s, p, d in zip(strides[1:], _packed_strides(features, itemsize), features) if d > 1)
        pitch = strides[0] if rows > 1 else row_bytes
        if not packed or pitch < row_bytes:
            return None
    return CudaInput(int(interface["data"][0] or 0), rows, row_bytes, pitch, None,
                     _interface_stream(name, interface), "other", None)


def _packed_strides(features: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a C-contiguous array of shape `features`."""
    strides, step = [], itemsize
    for d in reversed(features):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def wrap_output(output, framework: str, device: int, stream: int, is_bool: bool, keep_float16: bool = False):
    """The bridge's `output` (an object with `__cuda_array_interface__`, `pointer`, `nbytes`, `shape`, `typestr` and
    a settable `stream`) in the caller's framework, ready on `stream`: a float32 view of the same memory, converted on
    the GPU when the kernel wrote float16 (kept float16 with `keep_float16`: float16 in, float16 out), compared with 0
    for boolean outputs."""
    if framework == "cupy":
        cupy = sys.modules["cupy"]
        memory = cupy.cuda.UnownedMemory(output.pointer, output.nbytes, output, device)
        array = cupy.ndarray(output.shape, cupy.dtype(output.typestr), cupy.cuda.MemoryPointer(memory, 0))
        if is_bool:
            return array != 0
        return array if array.dtype == cupy.float32 or keep_float16 else array.astype(cupy.float32)
    if framework == "torch":
        torch = sys.modules["torch"]
    else:
        try:
            import torch
        except ImportError:
            # consumers of the interface order themselves after `stream`, as its version 3 asks
            output.stream = stream
            return output
    tensor = torch.as_tensor(output, device=f"cuda:{device}")
    if is_bool:
        return tensor != 0
    return tensor if tensor.dtype == torch.float32 or keep_float16 else tensor.float()


def is_float16(x: Any) -> bool:
    """Whether `x`, a CUDA array, holds float16 (PyTorch, CuPy or an interface's typestr; False for DLPack-only
    producers, which are read through PyTorch as they are)."""
    kind = framework_of(x)
    if kind == "torch":
        return x.dtype == sys.modules["torch"].float16
    if kind == "cupy":
        return x.dtype.str == KERNEL_TYPESTRS["f16"]
    try:
        interface = getattr(x, "__cuda_array_interface__", None)
    except Exception:  # a broken interface is reported by `as_cuda_input`, which reads it again
        return False
    return isinstance(interface, dict) and interface.get("typestr") == KERNEL_TYPESTRS["f16"]


def to_host(name: str, x: Any) -> np.ndarray:
    """A CUDA array copied to a numpy array (for the work that runs on the host, such as the numpy trainer)."""
    kind = framework_of(x)
    if kind == "cupy":
        return sys.modules["cupy"].asnumpy(x)
    torch = sys.modules["torch"] if kind == "torch" else _import_torch(name, "copy it to the host")
    tensor = x if kind == "torch" else (torch.as_tensor(x) if hasattr(x, "__cuda_array_interface__")
                                        else torch.from_dlpack(x))
    return tensor.detach().cpu().numpy()
