"""Selecting and joining along an axis: Concat, Split, Slice and Gather, all onto IR SLICE (one axis per node),
CONCAT and RESHAPE. The batch axis can be neither split nor joined, but a Slice that keeps all of it is accepted."""

from __future__ import annotations

import math

from coopnn.graph.ir import Op
from coopnn.graph.onnx.context import ConversionContext
from coopnn.graph.onnx.node import OnnxNode
from coopnn.graph.onnx.registry import converter

# Exporters write "to the end" as INT64_MAX or INT32_MAX; an end this large on the batch axis keeps every sample.
_OPEN_END = 2**31 - 1


@converter("Concat", since=(4, 11, 13))
def concat(node: OnnxNode, ctx: ConversionContext) -> None:
    operands = [n for n in node.inputs if n]
    axis = ctx.axis(node.attr("axis"), ctx.rank(operands[0]))
    ctx.emit(Op.CONCAT, operands, {"axis": axis}, output=node.outputs[0])


def _split_sizes(node: OnnxNode, ctx: ConversionContext, dim: int) -> list[int]:
    if node.input(1) is not None:
        return [int(s) for s in ctx.static_value(node.input(1), "split").ravel()]
    if node.attr("split") is not None:
        return [int(s) for s in node.attr("split")]
    parts = int(node.attr("num_outputs", len(node.outputs)))
    # opset 18: the last part is smaller when the axis does not divide evenly
    chunk = math.ceil(dim / parts)
    return [chunk] * (parts - 1) + [dim - chunk * (parts - 1)]


@converter("Split", since=(2, 11, 13, 18))
def split(node: OnnxNode, ctx: ConversionContext) -> None:
    x = node.input(0)
    shape = ctx.shape(x)
    axis = ctx.axis(node.attr("axis", 0), len(shape))
    dim = shape[axis]
    if dim is None:
        ctx.fail("splitting the batch axis is not supported")
    sizes = _split_sizes(node, ctx, dim)
    if len(sizes) != len(node.outputs) or sum(sizes) != dim or min(sizes) < 0:
        ctx.fail(f"sizes {sizes} do not split axis {axis} of size {dim} into {len(node.outputs)} outputs")
    start = 0
    for output, size in zip(node.outputs, sizes):
        if output:
            ctx.emit(Op.SLICE, [x], {"axis": axis, "start": start, "stop": start + size, "step": 1}, output=output)
        start += size


def _clamped(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    """ONNX Slice bounds on an axis of size `dim`, as the start and stop of a Python range."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)


def _slice(node: OnnxNode, ctx: ConversionContext, starts: list[int], ends: list[int], axes: list[int] | None,
           steps: list[int] | None) -> None:
    x = node.input(0)
    shape = ctx.shape(x)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        ctx.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    cuts = []
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = ctx.axis(axis, len(shape))
        if step == 0:
            ctx.fail("a slice step of 0 is not allowed")
        if shape[axis] is None:
            if (start, step) != (0, 1) or end < _OPEN_END:
                ctx.fail("slicing the batch axis is not supported (only a slice that keeps all of it)")
            continue
        lo, hi = _clamped(start, end, step, shape[axis])
        cuts.append({"axis": axis, "start": lo, "stop": hi, "step": step})
    result = x
    for i, cut in enumerate(cuts, start=1):
        result = ctx.emit(Op.SLICE, [result], cut, output=node.outputs[0] if i == len(cuts) else None)
    if not cuts:
        ctx.emit(Op.IDENTITY, [x], output=node.outputs[0])


def _ints(ctx: ConversionContext, name: str | None, role: str) -> list[int] | None:
    return None if name is None else [int(v) for v in ctx.static_value(name, role).ravel()]


@converter("Slice", since=1)
def slice_with_attributes(node: OnnxNode, ctx: ConversionContext) -> None:
    axes = node.attr("axes")
    _slice(node, ctx, list(node.attr("starts")), list(node.attr("ends")), None if axes is None else list(axes), None)


@converter("Slice", since=(10, 11, 13))
def slice_with_inputs(node: OnnxNode, ctx: ConversionContext) -> None:
    _slice(node, ctx, _ints(ctx, node.input(1), "starts"), _ints(ctx, node.input(2), "ends"),
           _ints(ctx, node.input(3), "axes"), _ints(ctx, node.input(4), "steps"))


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    """Consecutive ascending indices grouped into [start, stop) ranges."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][1] == i:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    return [(a, b) for a, b in runs]


@converter("Gather", since=(1, 11, 13))
def gather(node: OnnxNode, ctx: ConversionContext) -> None:
    x = node.input(0)
    indices = ctx.static_value(node.input(1), "indices")
    shape = ctx.shape(x)
    axis = ctx.axis(node.attr("axis", 0), len(shape))
    dim = shape[axis]
    if dim is None:
        ctx.fail("gathering along the batch axis is not supported")
    flat = [int(i) + dim if i < 0 else int(i) for i in indices.ravel()]
    if not flat or any(not 0 <= i < dim for i in flat):
        ctx.fail(f"indices {indices.ravel().tolist()} do not select from an axis of size {dim}")
    out_shape = tuple(shape[:axis]) + tuple(indices.shape) + tuple(shape[axis + 1:])
    runs = _runs(flat)
    reshaped = tuple(indices.shape) != (len(flat),)
    last = None if reshaped else node.outputs[0]
    pieces = [ctx.emit(Op.SLICE, [x], {"axis": axis, "start": a, "stop": b, "step": 1},
                       output=last if len(runs) == 1 else None) for a, b in runs]
    gathered = pieces[0] if len(pieces) == 1 else ctx.emit(Op.CONCAT, pieces, {"axis": axis}, output=last)
    if reshaped:
        ctx.emit(Op.RESHAPE, [gathered], {"shape": out_shape}, output=node.outputs[0])
