"""fuse_activation: an activation that alone reads a LINEAR result (not a graph output) rides on the LINEAR."""

from __future__ import annotations

import pytest

from coopnn.graph.ir import Activation, Op
from coopnn.graph.passes.fuse_activation import fuse_activation
from tests.graph.passes.conftest import GraphBuilder, apply_checked, op_list


def linear(g: GraphBuilder, x: str, width: int, name: str | None = None) -> str:
    return g.node(Op.LINEAR, x, g.weight(f"w{len(g.nodes)}", width, g.values[x].shape[-1]), out=name)


@pytest.mark.parametrize(
    "op, attrs",
    [
        (Op.RELU, {}),
        (Op.LEAKY_RELU, {"alpha": 0.2}),
        (Op.CLIP, {"min": 0.0, "max": 6.0}),
        (Op.GELU, {"approximate": "tanh"}),
    ],
)
def test_activation_after_linear_is_fused_with_its_attributes(op, attrs):
    g = GraphBuilder()
    h = linear(g, g.input("x", 3), 4)
    y = g.node(op, h, out="y", **attrs)
    graph = g.build(y)

    fused = apply_checked(fuse_activation, graph)

    (node,) = fused.nodes
    assert node.op is Op.LINEAR and node.outputs == ("y",) and node.name == "n_" + h
    assert node.activation == Activation(op, attrs)
    assert h not in fused.values


def test_linear_read_by_two_nodes_keeps_its_activation_separate():
    g = GraphBuilder()
    h = linear(g, g.input("x", 3), 4)
    y = g.node(Op.ADD, g.node(Op.SIGMOID, h), h, out="y")
    graph = g.build(y)

    assert op_list(apply_checked(fuse_activation, graph)) == [Op.LINEAR, Op.SIGMOID, Op.ADD]


def test_linear_that_is_a_graph_output_keeps_its_activation_separate():
    g = GraphBuilder()
    h = linear(g, g.input("x", 3), 4, name="pre")
    y = g.node(Op.TANH, h, out="y")
    graph = g.build(y, h)

    fused = apply_checked(fuse_activation, graph)

    assert op_list(fused) == [Op.LINEAR, Op.TANH]
    assert fused.nodes[0].activation is None


def test_only_one_activation_rides_on_a_linear():
    g = GraphBuilder()
    h = linear(g, g.input("x", 3), 4)
    y = g.node(Op.SIGMOID, g.node(Op.RELU, h), out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_activation, graph)

    assert op_list(fused) == [Op.LINEAR, Op.SIGMOID]
    assert fused.nodes[0].activation.op is Op.RELU


def test_stacked_layers_each_take_their_own_activation():
    g = GraphBuilder()
    h = g.node(Op.SILU, linear(g, g.input("x", 3), 8))
    h = g.node(Op.SOFTPLUS, linear(g, h, 8), beta=2.0, threshold=5.0)
    y = linear(g, h, 2, name="y")
    graph = g.build(y)

    fused = apply_checked(fuse_activation, graph)

    assert [n.activation.op if n.activation else None for n in fused.nodes] == [Op.SILU, Op.SOFTPLUS, None]


@pytest.mark.parametrize(
    "op, attrs",
    [(Op.SOFTMAX, {"axis": -1}), (Op.CAST, {"to": "bool"}), (Op.NOT, {}), (Op.IDENTITY, {})],
)
def test_non_activations_after_linear_are_not_fused(op, attrs):
    g = GraphBuilder()
    h = linear(g, g.input("x", 3), 4)
    source = g.node(Op.GREATER, h, g.constant("zero", 0.0)) if op is Op.NOT else h
    y = g.node(op, source, out="y", **attrs)
    graph = g.build(y)

    assert op_list(apply_checked(fuse_activation, graph)) == op_list(graph)


def test_activation_after_a_non_linear_node_is_not_fused():
    g = GraphBuilder()
    x = g.input("x", 3)
    y = g.node(Op.RELU, g.node(Op.MATMUL, x, g.weight("w", 3, 2)), out="y")
    graph = g.build(y)

    assert apply_checked(fuse_activation, graph).nodes == graph.nodes
