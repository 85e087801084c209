"""ONNX TensorProto (initializer or Constant value) → numpy array, checking its declared size before trusting it.

Floating tensors come out as float32 (the IR computes in float32), integer tensors as int64, booleans as bool. A
tensor declaring more than MAX_TENSOR_BYTES is refused before anything is allocated or read for it.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from coopnn.errors import ModelFormatError

_FLOATS = {
    TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16,
    TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ,
}
_INTEGERS = {
    TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
    TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64,
}
# Far beyond any weight matrix of the MLPs coopnn runs (a 4096 x 4096 float32 matrix is 64 MiB); what a hostile
# model can make coopnn allocate for one tensor.
MAX_TENSOR_BYTES = 1 << 30


def element_type_name(data_type: int) -> str:
    try:
        return TensorProto.DataType.Name(data_type)
    except ValueError:
        return f"type code {data_type}"


def declared_bytes(tensor: TensorProto, what: str) -> int:
    """Bytes of data `tensor`'s shape and element type declare: ModelFormatError for an element type coopnn does not
    read, a negative dimension, or more than MAX_TENSOR_BYTES."""
    kind = tensor.data_type
    if kind not in _FLOATS and kind not in _INTEGERS and kind != TensorProto.BOOL:
        raise ModelFormatError(f"{what} has element type {element_type_name(kind)}; coopnn reads float, integer "
                               "and bool tensors")
    dims = tuple(tensor.dims)
    if any(d < 0 for d in dims):
        raise ModelFormatError(f"{what} has a negative dimension in its shape {list(dims)}")
    count = 1
    for d in dims:
        count *= d
    size = count * onnx.helper.tensor_dtype_to_np_dtype(kind).itemsize
    if size > MAX_TENSOR_BYTES:
        raise ModelFormatError(f"{what} declares shape {list(dims)} of {element_type_name(kind)}: {size} bytes; "
                               f"coopnn reads tensors of at most {MAX_TENSOR_BYTES} bytes")
    return size


def tensor_to_array(tensor: TensorProto, what: str) -> np.ndarray:
    """The values of `tensor`; `what` names it in errors ("initializer 'w'", "Constant node 'c'")."""
    kind = tensor.data_type
    size = declared_bytes(tensor, what)
    if tensor.data_location == TensorProto.EXTERNAL:
        raise ModelFormatError(f"{what} keeps its data in an external file that was not loaded")
    dims = tuple(tensor.dims)
    if tensor.HasField("raw_data") and len(tensor.raw_data) != size:
        raise ModelFormatError(f"{what} holds {len(tensor.raw_data)} bytes of data but its shape {list(dims)} of "
                               f"{element_type_name(kind)} needs {size}")
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as e:  # onnx raises ValueError, TypeError or IndexError for inconsistent typed fields
        raise ModelFormatError(f"{what} cannot be read: {e}") from e
    if array.shape != dims:
        raise ModelFormatError(f"{what} holds {array.size} values but its shape is {list(dims)}")
    if kind in _FLOATS:
        return array.astype(np.float32)
    if kind in _INTEGERS:
        return array.astype(np.int64)
    return array.astype(np.bool_)
