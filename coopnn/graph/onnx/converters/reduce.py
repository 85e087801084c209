"""Reductions over feature axes: ReduceSum, ReduceMean, ReduceMax, ReduceMin, and ReduceSumSquare and ReduceL2 built
from a product and a sum. Older versions take the axes as an attribute, newer ones as an input."""

from __future__ import annotations

from typing import Callable

from coopnn.graph.ir import Op
from coopnn.graph.onnx.context import ConversionContext
from coopnn.graph.onnx.node import OnnxNode
from coopnn.graph.onnx.registry import Converter, converter

# (ctx, x, reduce attributes, output name) → emits the reduction
Reduction = Callable[[ConversionContext, str, dict, str], None]


def _plain(ir_op: Op) -> Reduction:
    def emit(ctx: ConversionContext, x: str, attrs: dict, output: str) -> None:
        ctx.emit(ir_op, [x], attrs, output=output)

    return emit


def _sum_square(ctx: ConversionContext, x: str, attrs: dict, output: str) -> None:
    ctx.emit(Op.REDUCE_SUM, [ctx.emit(Op.MUL, [x, x])], attrs, output=output)


def _l2(ctx: ConversionContext, x: str, attrs: dict, output: str) -> None:
    ctx.emit(Op.SQRT, [ctx.emit(Op.REDUCE_SUM, [ctx.emit(Op.MUL, [x, x])], attrs)], output=output)


# op_type: (reduction, versions with an axes attribute, versions with an axes input)
_REDUCTIONS: dict[str, tuple[Reduction, tuple[int, ...], tuple[int, ...]]] = {
    "ReduceSum": (_plain(Op.REDUCE_SUM), (1, 11), (13,)),
    "ReduceMean": (_plain(Op.REDUCE_MEAN), (1, 11, 13), (18,)),
    "ReduceMax": (_plain(Op.REDUCE_MAX), (1, 11, 12, 13), (18, 20)),
    "ReduceMin": (_plain(Op.REDUCE_MIN), (1, 11, 12, 13), (18, 20)),
    "ReduceSumSquare": (_sum_square, (1, 11, 13), (18,)),
    "ReduceL2": (_l2, (1, 11, 13), (18,)),
}


def _converter(reduction: Reduction, axes_from_input: bool) -> Converter:
    def convert(node: OnnxNode, ctx: ConversionContext) -> None:
        x = node.input(0)
        rank = ctx.rank(x)
        if axes_from_input:
            name = node.input(1)
            axes = [] if name is None else [int(a) for a in ctx.static_value(name, "axes").ravel()]
        else:
            axes = list(node.attr("axes", ()))
        if not axes and node.attr("noop_with_empty_axes", 0):
            ctx.emit(Op.IDENTITY, [x], output=node.outputs[0])
            return
        axes = sorted({ctx.axis(a, rank) for a in axes}) if axes else list(range(rank))
        if any(ctx.shape(x)[a] == 0 for a in axes):
            ctx.fail("reducing over an empty axis is not supported")
        reduction(ctx, x, {"axes": tuple(axes), "keepdims": bool(node.attr("keepdims", 1))}, node.outputs[0])

    return convert


for _op_type, (_reduction, _attribute_versions, _input_versions) in _REDUCTIONS.items():
    converter(_op_type, since=_attribute_versions)(_converter(_reduction, axes_from_input=False))
    converter(_op_type, since=_input_versions)(_converter(_reduction, axes_from_input=True))
