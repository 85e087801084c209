"""Constant, ConstantOfShape, Identity and Cast: values known at import time, and changes of element type.

The IR computes in float32 with boolean masks. A Cast of a run-time value may go to float32, float64 (kept in float32)
or bool; casts to half precision or integers only apply to constants, evaluated here.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from coopnn.graph.ir import Op
from coopnn.graph.onnx.context import ConversionContext
from coopnn.graph.onnx.node import OnnxNode
from coopnn.graph.onnx.registry import converter
from coopnn.graph.onnx.static_eval import StaticEvalError, cast_static, is_symbolic
from coopnn.graph.onnx.tensors import element_type_name, tensor_to_array

# ONNX element type → the import-time type a Cast produces ("f16" and "bf16" round, then stay float32 arrays)
_CAST_TARGETS = {
    TensorProto.FLOAT: "f32",
    TensorProto.DOUBLE: "f32",
    TensorProto.FLOAT16: "f16",
    TensorProto.BFLOAT16: "bf16",
    TensorProto.BOOL: "bool",
    **{t: "i64" for t in (TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
                          TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64)},
}


# Constant's plain-number attributes and the element type of the array each gives
_NUMBER_ATTRIBUTES = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
                      "value_ints": np.int64}


def _constant_value(node: OnnxNode) -> np.ndarray | None:
    if "value" in node.attrs:
        return tensor_to_array(node.attrs["value"], f"Constant node {node.name!r}")
    for key, kind in _NUMBER_ATTRIBUTES.items():
        if key in node.attrs:
            return np.asarray(node.attrs[key], kind)
    return None


@converter("Constant", since=(1, 9, 11, 12, 13, 19, 21, 23, 24, 25))
def constant(node: OnnxNode, ctx: ConversionContext) -> None:
    value = _constant_value(node)
    if value is None:
        ctx.fail(f"a constant given as {', '.join(node.attrs)} is not supported (only tensors, floats and ints)")
    ctx.set_static(node.outputs[0], value)


@converter("ConstantOfShape", since=(9, 20, 21, 23, 24, 25))
def constant_of_shape(node: OnnxNode, ctx: ConversionContext) -> None:
    shape = ctx.static_value(node.input(0), "shape")
    if is_symbolic(shape):
        ctx.fail("its shape depends on the batch size; coopnn constants have no batch axis")
    dims = tuple(int(d) for d in shape.ravel())
    ctx.check_constant_size(dims)
    tensor = node.attr("value")
    fill = np.zeros(1, np.float32) if tensor is None else tensor_to_array(tensor, f"value of node {node.name!r}")
    if fill.size != 1:
        ctx.fail(f"its value must hold one element, got {fill.size}")
    ctx.set_static(node.outputs[0], np.full(dims, fill.reshape(()), fill.dtype))


@converter("Identity", since=(1, 13, 14, 16, 19, 21, 23, 24, 25))
def identity(node: OnnxNode, ctx: ConversionContext) -> None:
    ctx.emit(Op.IDENTITY, [node.input(0)], output=node.outputs[0])


@converter("Cast", since=(6, 9, 13, 19, 21, 23, 24, 25, 28))
def cast(node: OnnxNode, ctx: ConversionContext) -> None:
    x, out = node.input(0), node.outputs[0]
    to = node.attr("to")
    target = _CAST_TARGETS.get(to)
    if target is None:
        ctx.fail(f"casting to {element_type_name(to)} is not supported")
    if ctx.is_static(x):
        try:
            ctx.set_static(out, cast_static(ctx.static[x], target))
        except StaticEvalError as e:
            ctx.fail(str(e))
    elif target in ("f16", "bf16", "i64"):
        ctx.fail(f"casting a value computed at run time to {element_type_name(to)} is not supported; coopnn "
                 "computes in float32")
    elif ctx.dtype(x) == target:
        ctx.emit(Op.IDENTITY, [x], output=out)
    else:
        ctx.emit(Op.CAST, [x], {"to": target}, output=out)
