"""Softmax, LogSoftmax and LayerNormalization over feature axes (the batch axis is never normalised over)."""

from __future__ import annotations

import numpy as np

from coopnn.graph.ir import Op
from coopnn.graph.onnx.context import ConversionContext
from coopnn.graph.onnx.node import OnnxNode
from coopnn.graph.onnx.registry import Converter, converter


def _softmax_coerced(ir_op: Op) -> Converter:
    """Opsets before 13: the input is viewed as 2-D, axes [0, axis) by [axis, rank), and normalised along the second."""

    def convert(node: OnnxNode, ctx: ConversionContext) -> None:
        x = node.input(0)
        shape = ctx.shape(x)
        axis = ctx.axis(node.attr("axis", 1), len(shape))
        if axis == len(shape) - 1:
            ctx.emit(ir_op, [x], {"axis": axis}, output=node.outputs[0])
            return
        if None in shape[axis:]:
            ctx.fail(f"axis {axis} makes {node.op_type} normalise across the batch axis")
        flat = tuple(shape[:axis]) + (int(np.prod(shape[axis:])),)
        normalised = ctx.emit(ir_op, [ctx.emit(Op.RESHAPE, [x], {"shape": flat})], {"axis": axis})
        ctx.emit(Op.RESHAPE, [normalised], {"shape": shape}, output=node.outputs[0])

    return convert


def _softmax(ir_op: Op) -> Converter:
    def convert(node: OnnxNode, ctx: ConversionContext) -> None:
        x = node.input(0)
        axis = ctx.axis(node.attr("axis", -1), ctx.rank(x))
        ctx.emit(ir_op, [x], {"axis": axis}, output=node.outputs[0])

    return convert


for _op_type, _ir_op in (("Softmax", Op.SOFTMAX), ("LogSoftmax", Op.LOG_SOFTMAX)):
    converter(_op_type, since=(1, 11))(_softmax_coerced(_ir_op))
    converter(_op_type, since=13)(_softmax(_ir_op))


@converter("LayerNormalization", since=17)
def layer_normalization(node: OnnxNode, ctx: ConversionContext) -> None:
    x = node.input(0)
    rank = ctx.rank(x)
    axis = ctx.axis(node.attr("axis", -1), rank)
    epsilon = float(node.attr("epsilon", 1e-5))
    operands = [x, node.input(1)] + ([node.input(2)] if node.input(2) else [])
    ctx.emit(Op.LAYER_NORM, operands, {"axis": axis, "epsilon": epsilon}, output=node.outputs[0])
    if node.output(1) is None and node.output(2) is None:
        return
    # the optional Mean and InvStdDev outputs, from the same statistics LAYER_NORM computes
    reduce = {"axes": tuple(range(axis, rank)), "keepdims": True}
    mean = ctx.emit(Op.REDUCE_MEAN, [x], reduce, output=node.output(1))
    if node.output(2) is None:
        return
    centred = ctx.emit(Op.SUB, [x, mean])
    variance = ctx.emit(Op.REDUCE_MEAN, [ctx.emit(Op.MUL, [centred, centred])], reduce)
    shifted = ctx.emit(Op.ADD, [variance, ctx.new_static(np.float32(epsilon), f"{node.name}/epsilon")])
    ctx.emit(Op.RECIPROCAL, [ctx.emit(Op.SQRT, [shifted])], output=node.output(2))
