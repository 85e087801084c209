"""Activation functions, each onto its IR operator: every row of `coopnn.graph.activations` with an ONNX operator
(Relu, LeakyRelu, Elu, Selu, Celu, Sigmoid, HardSigmoid, HardSwish, Tanh, Softplus, Softsign, Gelu, Mish and the
unary math functions Exp, Log, Sin, Cos, Neg, Abs, Sqrt, Reciprocal, Erf, Floor, Ceil, Sign), whose attributes
are the IR's with the same names and defaults, and PRelu and Clip, which ONNX writes differently."""

from __future__ import annotations

from typing import Any, Mapping

from coopnn.graph.activations import ACTIVATIONS
from coopnn.graph.ir import Op
from coopnn.graph.onnx.context import ConversionContext
from coopnn.graph.onnx.node import OnnxNode
from coopnn.graph.onnx.registry import Converter, converter
from coopnn.graph.ops import forward_defaults


def _activation(ir_op: Op, defaults: Mapping[str, Any]) -> Converter:
    def convert(node: OnnxNode, ctx: ConversionContext) -> None:
        attrs = {key: type(default)(node.attr(key, default)) for key, default in defaults.items()}
        ctx.emit(ir_op, [node.input(0)], attrs, output=node.outputs[0])

    return convert


for _op, _activation_def in ACTIVATIONS.items():
    if _activation_def.onnx is not None:
        _defaults = {name: forward_defaults(_op)[name] for name in _activation_def.onnx.attributes}
        converter(_activation_def.onnx.op_type, since=_activation_def.onnx.since)(_activation(_op, _defaults))


@converter("PRelu", since=(7, 9, 16))
def prelu(node: OnnxNode, ctx: ConversionContext) -> None:
    ctx.emit(Op.PRELU, [node.input(0), node.input(1)], output=node.outputs[0])


@converter("Clip", since=6)
def clip_with_attributes(node: OnnxNode, ctx: ConversionContext) -> None:
    bounds = {key: float(node.attrs[key]) if key in node.attrs else None for key in ("min", "max")}
    ctx.emit(Op.CLIP, [node.input(0)], bounds, output=node.outputs[0])


@converter("Clip", since=(11, 12, 13))
def clip_with_inputs(node: OnnxNode, ctx: ConversionContext) -> None:
    bounds = {}
    for key, name in (("min", node.input(1)), ("max", node.input(2))):
        value = None if name is None else ctx.static_value(name, key)
        if value is not None and value.size != 1:
            ctx.fail(f"its {key} must be a scalar, got shape {list(value.shape)}")
        bounds[key] = None if value is None else float(value.reshape(()))
    ctx.emit(Op.CLIP, [node.input(0)], bounds, output=node.outputs[0])
