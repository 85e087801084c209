"""The passes' shared bookkeeping: use counts and fresh names."""

from __future__ import annotations

from coopnn.graph.ir import Op
from coopnn.graph.passes.rewrite import NameScope, use_counts
from tests.graph.passes.conftest import GraphBuilder


def test_use_counts_count_each_input_slot_and_each_graph_output():
    g = GraphBuilder()
    x = g.input("x", 2)
    square = g.node(Op.MUL, x, x, out="square")
    y = g.node(Op.NEG, square, out="y")
    counts = use_counts(g.build(y, square))

    assert counts["x"] == 2
    assert counts["square"] == 2
    assert counts["y"] == 1


def test_fresh_names_avoid_every_node_value_and_constant_name_and_each_other():
    g = GraphBuilder()
    x = g.input("x", 2)
    g.constant("w_t", [1.0, 2.0])
    y = g.node(Op.ADD, x, "w_t", out="y")
    names = NameScope(g.build(y))

    assert names.fresh("fresh") == "fresh"
    assert names.fresh("fresh") == "fresh_1"
    assert names.fresh("w_t") == "w_t_1"
    assert names.fresh("n_y") == "n_y_1"
    assert names.fresh("x") == "x_1"
