"""Activation functions: Relu, LeakyRelu, PRelu, Elu, Selu, Celu, Sigmoid, HardSigmoid, HardSwish, Tanh, Softplus,
Softsign, Gelu, Mish and Clip, each onto its IR operator (ONNX attribute names are the IR's)."""

from __future__ import annotations

from typing import Any, Mapping

from coopnn.graph.ir import Op
from coopnn.graph.onnx.context import ConversionContext
from coopnn.graph.onnx.node import OnnxNode
from coopnn.graph.onnx.registry import Converter, converter

_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875

# op_type: (operator versions, IR operator, attributes with their ONNX defaults)
_ACTIVATIONS: dict[str, tuple[tuple[int, ...], Op, Mapping[str, Any]]] = {
    "Relu": ((6, 13, 14), Op.RELU, {}),
    "LeakyRelu": ((6, 16), Op.LEAKY_RELU, {"alpha": 0.01}),
    "Elu": ((6, 22), Op.ELU, {"alpha": 1.0}),
    "Selu": ((6, 22), Op.SELU, {"alpha": _SELU_ALPHA, "gamma": _SELU_GAMMA}),
    "Celu": ((12, 28), Op.CELU, {"alpha": 1.0}),
    "Sigmoid": ((6, 13), Op.SIGMOID, {}),
    "HardSigmoid": ((6, 22), Op.HARD_SIGMOID, {"alpha": 0.2, "beta": 0.5}),
    "HardSwish": ((14, 22), Op.HARD_SWISH, {}),
    "Tanh": ((6, 13), Op.TANH, {}),
    "Softplus": ((1, 22), Op.SOFTPLUS, {}),
    "Softsign": ((1, 22), Op.SOFTSIGN, {}),
    "Gelu": ((20,), Op.GELU, {"approximate": "none"}),
    "Mish": ((18, 22), Op.MISH, {}),
}


def _activation(ir_op: Op, defaults: Mapping[str, Any]) -> Converter:
    def convert(node: OnnxNode, ctx: ConversionContext) -> None:
        attrs = {key: type(default)(node.attr(key, default)) for key, default in defaults.items()}
        ctx.emit(ir_op, [node.input(0)], attrs, output=node.outputs[0])

    return convert


for _op_type, (_since, _ir_op, _defaults) in _ACTIVATIONS.items():
    converter(_op_type, since=_since)(_activation(_ir_op, _defaults))


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
