"""Shape operators: Reshape, Flatten, Unsqueeze, Squeeze and Expand (all IR RESHAPE or a broadcast), Transpose, and
Shape, which is evaluated at import time with a symbolic batch size.

Targets that exporters compute from `Shape` (Shape → Gather → Unsqueeze → Concat) arrive here as static shape
tensors holding BATCH; they resolve to a per-sample shape with the batch axis first, or the node is unsupported.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from coopnn.graph.ir import Op
from coopnn.graph.onnx.context import ConversionContext
from coopnn.graph.onnx.node import OnnxNode
from coopnn.graph.onnx.registry import converter
from coopnn.graph.onnx.static_eval import (
    BATCH,
    BatchDim,
    StaticEvalError,
    exact_div,
    normalize,
    product,
    shape_tensor,
)

Shape = tuple


def _symbolic(shape: Shape) -> list[Any]:
    return [BATCH if d is None else d for d in shape]


def _ir_shape(ctx: ConversionContext, dims: Sequence[Any]) -> Shape:
    """dims with BATCH turned back into None; any other multiple of the batch size mixes samples: unsupported."""
    if any(isinstance(d, BatchDim) and d != BATCH for d in dims) or sum(d == BATCH for d in dims) > 1:
        ctx.fail(f"the result shape {list(dims)} mixes the batch axis with other axes")
    return tuple(None if d == BATCH else int(d) for d in dims)


def _reshape_target(ctx: ConversionContext, source: Shape, target: np.ndarray, allowzero: bool) -> Shape:
    if target.ndim != 1:
        ctx.fail(f"its shape input must be 1-D, got shape {list(target.shape)}")
    src = _symbolic(source)
    dims = list(target.tolist())
    if not allowzero:
        if any(d == 0 for d in dims[len(src):]):
            ctx.fail(f"shape {dims} copies (0) an axis that the input of rank {len(src)} does not have")
        dims = [src[i] if d == 0 else d for i, d in enumerate(dims)]
    if any(not isinstance(d, BatchDim) and d < -1 for d in dims) or sum(d == -1 for d in dims) > 1:
        ctx.fail(f"shape {dims} is not a valid Reshape target")
    total = product(src)
    try:
        if -1 in dims:
            dims[dims.index(-1)] = exact_div(total, product([d for d in dims if d != -1]))
        elif product(dims) != total:
            ctx.fail(f"cannot reshape {list(src)} into {dims}: the number of elements differs")
    except StaticEvalError as e:
        ctx.fail(f"cannot reshape {list(src)} into {dims}: {e}")
    return _ir_shape(ctx, dims)


@converter("Reshape", since=(5, 13, 14, 19, 21, 23, 24, 25))
def reshape(node: OnnxNode, ctx: ConversionContext) -> None:
    x = node.input(0)
    target = ctx.static_value(node.input(1), "shape")
    shape = _reshape_target(ctx, ctx.shape(x), target, allowzero=bool(node.attr("allowzero", 0)))
    ctx.emit(Op.RESHAPE, [x], {"shape": shape}, output=node.outputs[0])


@converter("Flatten", since=(1, 9, 11, 13, 21, 23, 24, 25))
def flatten(node: OnnxNode, ctx: ConversionContext) -> None:
    x = node.input(0)
    src = _symbolic(ctx.shape(x))
    axis = node.attr("axis", 1)
    if not -len(src) <= axis <= len(src):
        ctx.fail(f"axis {axis} is out of range for rank {len(src)}")
    axis = axis + len(src) if axis < 0 else axis
    shape = _ir_shape(ctx, [product(src[:axis]), product(src[axis:])])
    ctx.emit(Op.RESHAPE, [x], {"shape": shape}, output=node.outputs[0])


def _axes(node: OnnxNode, ctx: ConversionContext, from_input: bool) -> list[int] | None:
    if not from_input:
        axes = node.attr("axes")
        return None if axes is None else list(axes)
    name = node.input(1)
    return None if name is None else [int(a) for a in ctx.static_value(name, "axes").ravel()]


def _unsqueeze(node: OnnxNode, ctx: ConversionContext, from_input: bool) -> None:
    x = node.input(0)
    shape = list(ctx.shape(x))
    axes = _axes(node, ctx, from_input) or []
    rank = len(shape) + len(axes)
    normalized = sorted({ctx.axis(a, rank) for a in axes})
    if len(normalized) != len(axes):
        ctx.fail(f"axes {axes} repeat an axis")
    for axis in normalized:
        shape.insert(axis, 1)
    ctx.emit(Op.RESHAPE, [x], {"shape": tuple(shape)}, output=node.outputs[0])


def _squeeze(node: OnnxNode, ctx: ConversionContext, from_input: bool) -> None:
    x = node.input(0)
    shape = ctx.shape(x)
    axes = _axes(node, ctx, from_input)
    # without axes ONNX drops every size-1 axis; the batch axis stays, whatever size the batch has at run time
    drop = {i for i, d in enumerate(shape) if d == 1} if axes is None else {ctx.axis(a, len(shape)) for a in axes}
    for axis in drop:
        if shape[axis] != 1:
            ctx.fail(f"axis {axis} has size {'batch' if shape[axis] is None else shape[axis]}, not 1")
    kept = tuple(d for i, d in enumerate(shape) if i not in drop)
    ctx.emit(Op.RESHAPE, [x], {"shape": kept}, output=node.outputs[0])


@converter("Unsqueeze", since=(1, 11))
def unsqueeze_with_attribute(node: OnnxNode, ctx: ConversionContext) -> None:
    _unsqueeze(node, ctx, from_input=False)


@converter("Unsqueeze", since=(13, 21, 23, 24, 25))
def unsqueeze_with_input(node: OnnxNode, ctx: ConversionContext) -> None:
    _unsqueeze(node, ctx, from_input=True)


@converter("Squeeze", since=(1, 11))
def squeeze_with_attribute(node: OnnxNode, ctx: ConversionContext) -> None:
    _squeeze(node, ctx, from_input=False)


@converter("Squeeze", since=(13, 21, 23, 24, 25))
def squeeze_with_input(node: OnnxNode, ctx: ConversionContext) -> None:
    _squeeze(node, ctx, from_input=True)


@converter("Transpose", since=(1, 13, 21, 23, 24, 25))
def transpose(node: OnnxNode, ctx: ConversionContext) -> None:
    x = node.input(0)
    rank = ctx.rank(x)
    perm = tuple(node.attr("perm", range(rank - 1, -1, -1)))
    ctx.emit(Op.TRANSPOSE, [x], {"perm": tuple(ctx.axis(p, rank, "perm entry") for p in perm)},
             output=node.outputs[0])


def _broadcast_dims(ctx: ConversionContext, a: Sequence[Any], b: Sequence[Any]) -> list[Any]:
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + list(a)
    b = [1] * (rank - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            ctx.fail(f"shapes {a} and {b} do not broadcast")
        out.append(y if x == 1 else x)
    return out


@converter("Expand", since=(8, 13))
def expand(node: OnnxNode, ctx: ConversionContext) -> None:
    x = node.input(0)
    target = ctx.static_value(node.input(1), "shape")
    if target.ndim != 1:
        ctx.fail(f"its shape input must be 1-D, got shape {list(target.shape)}")
    dims = list(target.tolist())
    shape = _ir_shape(ctx, _broadcast_dims(ctx, _symbolic(ctx.shape(x)), dims))
    if shape == ctx.shape(x):
        ctx.emit(Op.IDENTITY, [x], output=node.outputs[0])
        return
    # Expand is a broadcast: multiplying by ones (or and-ing with True) broadcasts and keeps every value exactly
    ones_shape = tuple(1 if isinstance(d, BatchDim) else int(d) for d in dims)
    ctx.check_constant_size(ones_shape)
    kind = ctx.dtype(x)
    ones = np.ones(ones_shape, {"f32": np.float32, "bool": np.bool_, "i64": np.int64}[kind])
    combine = Op.AND if kind == "bool" else Op.MUL
    ctx.emit(combine, [x, ctx.new_static(ones, f"{node.name}/ones")], output=node.outputs[0])


@converter("Shape", since=(1, 13, 15, 19, 21, 23, 24, 25))
def shape_of(node: OnnxNode, ctx: ConversionContext) -> None:
    dims = shape_tensor(ctx.shape(node.input(0)))
    start, end = node.attr("start", 0), node.attr("end", None)
    ctx.set_static(node.outputs[0], normalize(dims[start:end]))
