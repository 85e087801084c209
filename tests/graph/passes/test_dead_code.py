"""remove_dead_code: unused nodes and constants go, pass-through nodes are bypassed, output names stay."""

from __future__ import annotations

import pytest

from coopnn.graph.ir import Op
from coopnn.graph.passes.dead_code import remove_dead_code
from tests.graph.passes.conftest import GraphBuilder, apply_checked, op_list, producer


def test_nodes_and_constants_no_output_needs_are_removed():
    g = GraphBuilder()
    x = g.input("x", 3)
    unused_input = g.input("unused", 2)
    g.node(Op.RELU, g.node(Op.MUL, x, g.weight("dead_scale", 3)))
    g.weight("never_read", 4)
    y = g.node(Op.ADD, x, g.weight("b", 3), out="y")
    g.node(Op.NEG, unused_input)
    graph = g.build(y)

    cleaned = apply_checked(remove_dead_code, graph)

    assert op_list(cleaned) == [Op.ADD]
    assert set(cleaned.constants) == {"b"}
    assert [v.name for v in cleaned.inputs] == ["x", "unused"]
    assert set(cleaned.values) == {"x", "unused", "b", "y"}


def test_identity_chain_inside_the_graph_collapses():
    g = GraphBuilder()
    h = g.node(Op.LINEAR, g.input("x", 3), g.weight("w", 4, 3), out="h")
    h = g.node(Op.IDENTITY, g.node(Op.IDENTITY, h))
    y = g.node(Op.RELU, h, out="y")
    graph = g.build(y)

    cleaned = apply_checked(remove_dead_code, graph)

    assert op_list(cleaned) == [Op.LINEAR, Op.RELU]
    assert cleaned.nodes[1].inputs == ("h",)


def test_identity_chain_into_an_output_keeps_the_output_name():
    g = GraphBuilder()
    h = g.node(Op.LINEAR, g.input("x", 3), g.weight("w", 4, 3), out="h")
    z = g.node(Op.SIGMOID, h, out="z")
    y = g.node(Op.IDENTITY, g.node(Op.IDENTITY, h), out="y")
    graph = g.build(y, z)

    cleaned = apply_checked(remove_dead_code, graph)

    assert op_list(cleaned) == [Op.LINEAR, Op.SIGMOID]
    assert cleaned.nodes[0].outputs == ("y",)
    assert cleaned.nodes[1].inputs == ("y",)
    assert [v.name for v in cleaned.outputs] == ["y", "z"]


def test_two_outputs_copied_from_one_value_both_survive():
    g = GraphBuilder()
    h = g.node(Op.TANH, g.input("x", 3), out="h")
    first = g.node(Op.IDENTITY, h, out="first")
    second = g.node(Op.IDENTITY, h, out="second")
    graph = g.build(second, first)

    cleaned = apply_checked(remove_dead_code, graph)

    assert [(n.op, n.inputs, n.outputs) for n in cleaned.nodes] == [
        (Op.TANH, ("x",), ("first",)),
        (Op.IDENTITY, ("first",), ("second",)),
    ]


@pytest.mark.parametrize("source_kind", ["input", "constant", "output"])
def test_identity_to_an_output_stays_when_its_source_cannot_be_renamed(source_kind):
    g = GraphBuilder()
    x = g.input("x", 3)
    source = {"input": x, "constant": g.constant("c", [[1.0, 2.0, 3.0]])}.get(source_kind)
    source = source or g.node(Op.RELU, x, out="relu")
    y = g.node(Op.IDENTITY, source, out="y")
    outputs = (y, source) if source_kind == "output" else (y,)
    graph = g.build(*outputs)

    cleaned = apply_checked(remove_dead_code, graph)

    assert op_list(cleaned)[-1] is Op.IDENTITY
    assert producer(cleaned, "y").inputs == (source,)


@pytest.mark.parametrize(
    "op, attrs",
    [
        (Op.CONCAT, {"axis": -1}),
        (Op.RESHAPE, {"shape": (None, 2, 3)}),
        (Op.TRANSPOSE, {"perm": (0, 1, 2)}),
        (Op.CAST, {"to": "f32"}),
    ],
)
def test_pass_through_forms_are_bypassed(op, attrs):
    g = GraphBuilder()
    h = g.node(Op.EXP, g.input("x", 2, 3))
    y = g.node(Op.NEG, g.node(op, h, **attrs), out="y")
    graph = g.build(y)

    assert op_list(apply_checked(remove_dead_code, graph)) == [Op.EXP, Op.NEG]


def test_reshapes_transposes_and_concats_that_change_something_stay():
    g = GraphBuilder()
    x = g.input("x", 2, 3)
    h = g.node(Op.TRANSPOSE, g.node(Op.RESHAPE, x, shape=(None, 3, 2)), perm=(0, 2, 1))
    y = g.node(Op.CONCAT, h, x, axis=1, out="y")
    graph = g.build(y)

    assert apply_checked(remove_dead_code, graph).nodes == graph.nodes


def test_identity_of_a_constant_is_read_through():
    g = GraphBuilder()
    w = g.node(Op.IDENTITY, g.weight("w", 3, 2))
    y = g.node(Op.MATMUL, g.input("x", 3), w, out="y")
    graph = g.build(y)

    cleaned = apply_checked(remove_dead_code, graph)

    assert [n.inputs for n in cleaned.nodes] == [("x", "w")]
