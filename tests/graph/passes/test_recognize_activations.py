"""recognize_activations: GELU (exact and tanh) and SiLU written out in arithmetic become their activation node, in
the orders the exporters write them, and nothing else does."""

from __future__ import annotations

import math

import pytest

from coopnn.graph.ir import Activation, Op
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes.recognize_activations import recognize_activations
from tests.conftest import ROOT
from tests.graph.passes.conftest import GraphBuilder, apply_checked, checked_pipeline, op_list


def _exact_dynamo(g: GraphBuilder, x: str) -> str:
    """x * (0.5 * (erf(x / sqrt 2) + 1)), as torch.onnx's dynamo exporter writes GELU below opset 20."""
    erf = g.node(Op.ERF, g.node(Op.DIV, x, g.constant("sqrt2", math.sqrt(2))))
    gate = g.node(Op.MUL, g.constant("half", 0.5), g.node(Op.ADD, erf, g.constant("one", 1.0)))
    return g.node(Op.MUL, x, gate, out="y")


def _exact_legacy(g: GraphBuilder, x: str) -> str:
    """(x * (erf(x * (1 / sqrt 2)) + 1)) * 0.5, the legacy exporter's order (with the division as a product)."""
    erf = g.node(Op.ERF, g.node(Op.MUL, x, g.constant("inverse_sqrt2", 1 / math.sqrt(2))))
    product = g.node(Op.MUL, x, g.node(Op.ADD, g.constant("one", 1.0), erf))
    return g.node(Op.MUL, product, g.constant("half", 0.5), out="y")


def _tanh_dynamo(g: GraphBuilder, x: str) -> str:
    cubic = g.node(Op.MUL, g.constant("c", 0.044715), g.node(Op.POW, x, g.constant("three", 3.0)))
    inner = g.node(Op.MUL, g.constant("scale", math.sqrt(2 / math.pi)), g.node(Op.ADD, x, cubic))
    gate = g.node(Op.MUL, g.constant("half", 0.5), g.node(Op.ADD, g.node(Op.TANH, inner), g.constant("one", 1.0)))
    return g.node(Op.MUL, x, gate, out="y")


def _silu(g: GraphBuilder, x: str) -> str:
    return g.node(Op.MUL, x, g.node(Op.SIGMOID, x), out="y")


@pytest.mark.parametrize("write, op, attrs", [
    (_exact_dynamo, Op.GELU, {"approximate": "none"}),
    (_exact_legacy, Op.GELU, {"approximate": "none"}),
    (_tanh_dynamo, Op.GELU, {"approximate": "tanh"}),
    (_silu, Op.SILU, {}),
], ids=["gelu-dynamo", "gelu-legacy", "gelu-tanh", "silu"])
def test_a_written_out_activation_becomes_its_node(write, op, attrs):
    g = GraphBuilder()
    y = write(g, g.input("x", 5))
    graph = g.build(y)

    (node,) = apply_checked(recognize_activations, graph).nodes

    assert (node.op, dict(node.attrs), node.inputs, node.outputs) == (op, attrs, ("x",), ("y",))
    assert node.name == f"n_{y}"


def test_an_intermediate_read_elsewhere_keeps_the_arithmetic():
    g = GraphBuilder()
    x = g.input("x", 5)
    gate = g.node(Op.SIGMOID, x)
    y = g.node(Op.ADD, g.node(Op.MUL, x, gate), gate, out="y")
    graph = g.build(y)

    assert op_list(apply_checked(recognize_activations, graph)) == [Op.SIGMOID, Op.MUL, Op.ADD]


def test_other_constants_keep_the_arithmetic():
    g = GraphBuilder()
    x = g.input("x", 5)
    erf = g.node(Op.ERF, g.node(Op.DIV, x, g.constant("two", 2.0)))
    gate = g.node(Op.MUL, g.constant("half", 0.5), g.node(Op.ADD, erf, g.constant("one", 1.0)))
    graph = g.build(g.node(Op.MUL, x, gate, out="y"))

    assert Op.GELU not in op_list(apply_checked(recognize_activations, graph))


def _tanh_form(g: GraphBuilder, x: str, power=3.0, coefficient=0.044715, scale=math.sqrt(2 / math.pi),
               half=0.5) -> dict[str, str]:
    """The tanh form with its constants as given, and every value it computes by name."""
    values = {"power": g.node(Op.POW, x, g.constant("three", power))}
    values["cubic"] = g.node(Op.MUL, g.constant("c", coefficient), values["power"])
    values["sum"] = g.node(Op.ADD, x, values["cubic"])
    values["inner"] = g.node(Op.MUL, g.constant("scale", scale), values["sum"])
    values["tanh"] = g.node(Op.TANH, values["inner"])
    values["one_plus"] = g.node(Op.ADD, values["tanh"], g.constant("one", 1.0))
    values["gate"] = g.node(Op.MUL, g.constant("half", half), values["one_plus"])
    values["y"] = g.node(Op.MUL, x, values["gate"], out="y")
    return values


@pytest.mark.parametrize("constant", [dict(power=2.0), dict(coefficient=0.0447), dict(scale=0.8), dict(half=0.25)],
                         ids=lambda c: next(iter(c)))
def test_the_tanh_form_with_another_constant_keeps_the_arithmetic(constant):
    g = GraphBuilder()
    graph = g.build(_tanh_form(g, g.input("x", 5), **constant)["y"])

    assert Op.GELU not in op_list(apply_checked(recognize_activations, graph))


@pytest.mark.parametrize("intermediate", ["power", "cubic", "sum", "inner", "tanh", "one_plus", "gate"])
def test_an_intermediate_that_is_a_graph_output_keeps_the_arithmetic(intermediate):
    g = GraphBuilder()
    values = _tanh_form(g, g.input("x", 5))
    assert op_list(apply_checked(recognize_activations, g.build(values["y"]))) == [Op.GELU]  # alone, it is taken
    graph = g.build(values["y"], values[intermediate])

    assert Op.GELU not in op_list(apply_checked(recognize_activations, graph))


def test_a_gate_of_another_value_keeps_the_arithmetic():
    g = GraphBuilder()
    x, z = g.input("x", 5), g.input("z", 5)
    graph = g.build(g.node(Op.MUL, x, g.node(Op.SIGMOID, z), out="y"))

    assert op_list(apply_checked(recognize_activations, graph)) == [Op.SIGMOID, Op.MUL]


@pytest.mark.parametrize("name", ["gelu_silu_mlp", "gelu_silu_opset20"])
def test_the_exported_gelu_silu_network_becomes_four_linear_layers(name):
    optimized = checked_pipeline(import_model(ROOT / "models" / f"{name}.onnx"))

    assert op_list(optimized) == [Op.LINEAR] * 4
    assert [node.activation for node in optimized.nodes] == [
        Activation(Op.GELU, {"approximate": "none"}), Activation(Op.GELU, {"approximate": "tanh"}),
        Activation(Op.SILU, {}), None]
