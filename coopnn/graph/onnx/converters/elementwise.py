"""Elementwise operators: arithmetic (Add, Sub, Mul, Div, Pow, Max, Min, Sum, Mean), comparisons, logical operators
and Where. Operands broadcast as in numpy, constants included. The unary math functions are activations
(`converters/activations.py`)."""

from __future__ import annotations

import numpy as np

from coopnn.graph.ir import Op
from coopnn.graph.onnx.context import ConversionContext
from coopnn.graph.onnx.node import OnnxNode
from coopnn.graph.onnx.registry import Converter, converter

# op_type: (operator versions, IR operator). Binary operators before opset 7 broadcast by a different rule (the
# `broadcast` and `axis` attributes) and are left out; variadic ones before 8 take equal shapes, a case of numpy's.
_BINARY: dict[str, tuple[tuple[int, ...], Op]] = {
    "Add": ((7, 13, 14), Op.ADD),
    "Sub": ((7, 13, 14), Op.SUB),
    "Mul": ((7, 13, 14), Op.MUL),
    "Div": ((7, 13, 14), Op.DIV),
    "Pow": ((7, 12, 13, 15), Op.POW),
    "Less": ((7, 9, 13), Op.LESS),
    "LessOrEqual": ((12, 16), Op.LESS_EQUAL),
    "Greater": ((7, 9, 13), Op.GREATER),
    "GreaterOrEqual": ((12, 16), Op.GREATER_EQUAL),
    "Equal": ((7, 11, 13, 19), Op.EQUAL),
    "And": ((7,), Op.AND),
    "Or": ((7,), Op.OR),
    "Xor": ((7,), Op.XOR),
}
_VARIADIC: dict[str, tuple[tuple[int, ...], Op]] = {
    "Max": ((6, 8, 12, 13), Op.MAX),
    "Min": ((6, 8, 12, 13), Op.MIN),
    "Sum": ((6, 8, 13), Op.ADD),
}


def _binary(ir_op: Op) -> Converter:
    def convert(node: OnnxNode, ctx: ConversionContext) -> None:
        ctx.emit(ir_op, [node.input(0), node.input(1)], output=node.outputs[0])

    return convert


def _fold_operands(ctx: ConversionContext, ir_op: Op, operands: list[str], output: str | None) -> str:
    """operands[0] op operands[1] op ... from the left; a single operand passes through."""
    if len(operands) == 1:
        return ctx.emit(Op.IDENTITY, operands, output=output)
    result = operands[0]
    for i, operand in enumerate(operands[1:], start=2):
        result = ctx.emit(ir_op, [result, operand], output=output if i == len(operands) else None)
    return result


def _variadic(ir_op: Op) -> Converter:
    def convert(node: OnnxNode, ctx: ConversionContext) -> None:
        _fold_operands(ctx, ir_op, [n for n in node.inputs if n], node.outputs[0])

    return convert


for _op_type, (_since, _ir_op) in _BINARY.items():
    converter(_op_type, since=_since)(_binary(_ir_op))
for _op_type, (_since, _ir_op) in _VARIADIC.items():
    converter(_op_type, since=_since)(_variadic(_ir_op))


@converter("Not", since=1)
def logical_not(node: OnnxNode, ctx: ConversionContext) -> None:
    ctx.emit(Op.NOT, [node.input(0)], output=node.outputs[0])


@converter("Mean", since=(6, 8, 13))
def mean(node: OnnxNode, ctx: ConversionContext) -> None:
    operands = [n for n in node.inputs if n]
    total = _fold_operands(ctx, Op.ADD, operands, None)
    count = ctx.new_static(np.float32(len(operands)), f"{node.name}/count")
    ctx.emit(Op.DIV, [total, count], output=node.outputs[0])


@converter("Where", since=(9, 16))
def where(node: OnnxNode, ctx: ConversionContext) -> None:
    ctx.emit(Op.WHERE, [node.input(0), node.input(1), node.input(2)], output=node.outputs[0])
