"""infer_shapes: value records recomputed from the inputs, with the batch axis flowing through every rule."""

from __future__ import annotations

import pytest

from coopnn.errors import ModelFormatError
from coopnn.graph.ir import Graph, Node, Op, Value
from coopnn.graph.passes.infer_shapes import infer_shapes
from coopnn.graph.verify import VerificationError, verify
from tests.graph.passes.conftest import GraphBuilder, apply_checked


def sample_graph() -> Graph:
    g = GraphBuilder()
    x = g.input("x", 6)
    grid = g.node(Op.RESHAPE, x, shape=(None, 2, 3), out="grid")
    mask = g.node(Op.GREATER, grid, g.constant("zero", 0.0), out="mask")
    table = g.node(Op.NEG, g.constant("t", [[1.0, 2.0, 3.0]]), out="table")
    picked = g.node(Op.WHERE, mask, grid, table, out="picked")
    y = g.node(Op.REDUCE_SUM, picked, axes=(1,), keepdims=False, out="y")
    return g.build(y, table)


def test_records_match_the_operator_rules_batch_and_constants_alike():
    graph = sample_graph()

    inferred = apply_checked(infer_shapes, graph)

    assert inferred.values["grid"] == Value("grid", "f32", (None, 2, 3))
    assert inferred.values["mask"] == Value("mask", "bool", (None, 2, 3))
    assert inferred.values["table"] == Value("table", "f32", (1, 3))
    assert inferred.values["y"] == Value("y", "f32", (None, 3))
    assert inferred.outputs == (inferred.values["y"], inferred.values["table"])


def test_stale_records_are_replaced():
    graph = sample_graph()
    stale = dict(graph.values, picked=Value("picked", "bool", (None, 5)), y=Value("y", "f32", (None, 7)))
    broken = graph.replace(values=stale, outputs=(stale["y"], stale["table"]))
    with pytest.raises(VerificationError):
        verify(broken)

    repaired = verify(infer_shapes(broken))

    assert repaired.values == graph.values
    assert repaired.outputs == graph.outputs


def test_unused_records_are_dropped():
    graph = sample_graph()
    cluttered = graph.replace(values=dict(graph.values, ghost=Value("ghost", "f32", (None, 1))))

    assert "ghost" not in infer_shapes(cluttered).values


def test_new_input_shapes_flow_to_the_outputs():
    g = GraphBuilder()
    x = g.input("x", 1)
    y = g.node(Op.ADD, x, g.constant("offsets", [[1.0, 2.0, 3.0]]), out="y")
    graph = g.build(y)
    wider = graph.replace(inputs=(Value("x", "f32", (None, 3)),))

    inferred = verify(infer_shapes(wider))

    assert inferred.outputs[0].shape == (None, 3)


def test_shapes_that_do_not_combine_name_the_node_and_its_inputs():
    g = GraphBuilder()
    x = g.input("x", 3)
    y = g.node(Op.LINEAR, x, g.weight("w", 4, 3), out="y")
    graph = g.build(y).replace(inputs=(Value("x", "f32", (None, 5)),))

    with pytest.raises(ModelFormatError, match=r"node 'n_y' \(linear\).*'x' \[batch, 5\], 'w' \[4, 3\]"):
        infer_shapes(graph)


def test_reading_an_undefined_value_or_returning_one_is_a_model_format_error():
    g = GraphBuilder()
    x = g.input("x", 3)
    y = g.node(Op.RELU, x, out="y")
    graph = g.build(y)

    with pytest.raises(ModelFormatError, match="'n_y' .*'ghost'"):
        infer_shapes(graph.replace(nodes=(Node(Op.RELU, "n_y", ("ghost",), ("y",)),)))
    with pytest.raises(ModelFormatError, match="output 'y'"):
        infer_shapes(graph.replace(nodes=()))
