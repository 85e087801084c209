"""fold_constants: all-constant subgraphs become constants; scalar Mul/Div chains become one Mul."""

from __future__ import annotations

import numpy as np

from coopnn.graph.ir import Op
from coopnn.graph.passes.fold_constants import fold_constants
from tests.graph.passes.conftest import GraphBuilder, apply_checked, op_list, producer


def test_weight_transpose_reshape_unsqueeze_chain_folds_to_one_constant():
    g = GraphBuilder()
    x = g.input("x", 6)
    stored = g.weight("stored", 2, 3, 4)  # a weight kept as [out-groups, ..., in] that the model rearranges
    w = g.node(Op.TRANSPOSE, stored, perm=(2, 0, 1))  # [4, 2, 3]
    w = g.node(Op.RESHAPE, w, shape=(4, 6))
    w = g.node(Op.TRANSPOSE, w, perm=(1, 0))  # [6, 4]
    w = g.node(Op.RESHAPE, w, shape=(1, 6, 4))  # Unsqueeze(0)
    w = g.node(Op.RESHAPE, w, shape=(6, 4))  # Squeeze(0)
    y = g.node(Op.MATMUL, x, w, out="y")
    graph = g.build(y)

    folded = apply_checked(fold_constants, graph)

    assert op_list(folded) == [Op.MATMUL]
    weight = producer(folded, "y").inputs[1]
    expected = np.transpose(graph.constants["stored"], (2, 0, 1)).reshape(4, 6).T
    np.testing.assert_array_equal(folded.constants[weight], expected)
    assert set(folded.constants) == {weight}


def test_every_constant_only_node_folds_including_boolean_results():
    g = GraphBuilder()
    x = g.input("x", 3)
    limit = g.constant("limit", [0.5, -1.0, 2.0])
    doubled = g.node(Op.MUL, limit, g.constant("two", 2.0))
    mask = g.node(Op.GREATER, doubled, g.constant("zero", 0.0))
    y = g.node(Op.WHERE, mask, x, doubled, out="y")
    graph = g.build(y)

    folded = apply_checked(fold_constants, graph)

    assert op_list(folded) == [Op.WHERE]
    np.testing.assert_array_equal(folded.constants[mask], [True, False, True])
    assert folded.values[mask].dtype == "bool"
    np.testing.assert_array_equal(folded.constants[doubled], [1.0, -2.0, 4.0])


def test_a_graph_output_computed_from_constants_becomes_a_constant_output():
    g = GraphBuilder()
    x = g.input("x", 2)
    bias = g.node(Op.NEG, g.constant("b", [[1.0, 2.0]]), out="bias")
    y = g.node(Op.ADD, x, bias, out="y")
    graph = g.build(y, bias)

    folded = apply_checked(fold_constants, graph)

    assert op_list(folded) == [Op.ADD]
    np.testing.assert_array_equal(folded.constants["bias"], [[-1.0, -2.0]])


def test_scalar_multiply_chain_becomes_one_mul():
    g = GraphBuilder()
    x = g.input("x", 4)
    y = g.node(Op.MUL, g.node(Op.MUL, x, g.constant("two", 2.0)), g.constant("three", [3.0]), out="y")
    graph = g.build(y)

    folded = apply_checked(fold_constants, graph)

    (node,) = folded.nodes
    assert node.op is Op.MUL and node.inputs[0] == "x" and node.outputs == ("y",)
    scale = folded.constants[node.inputs[1]]
    assert scale.shape == (1,) and scale.dtype == np.float32
    assert scale[0] == 6.0


def test_mixed_mul_div_chain_in_either_operand_order_merges():
    g = GraphBuilder()
    x = g.input("x", 4)
    y = g.node(Op.MUL, g.constant("two", [[2.0]]), x)
    y = g.node(Op.DIV, y, g.constant("four", 4.0))
    y = g.node(Op.MUL, y, g.constant("five", 5.0), out="y")
    graph = g.build(y)

    folded = apply_checked(fold_constants, graph)

    (node,) = folded.nodes
    assert node.op is Op.MUL and node.inputs[0] == "x"
    np.testing.assert_array_equal(folded.constants[node.inputs[1]], [[2.5]])


def test_chain_link_read_elsewhere_or_returned_is_kept():
    g = GraphBuilder()
    x = g.input("x", 4)
    inner = g.node(Op.MUL, x, g.constant("two", 2.0), out="inner")
    y = g.node(Op.MUL, inner, g.constant("three", 3.0), out="y")
    graph = g.build(y, inner)

    folded = apply_checked(fold_constants, graph)

    assert folded.nodes == graph.nodes


def test_non_scalar_factors_and_constant_numerators_do_not_merge():
    g = GraphBuilder()
    x = g.input("x", 3)
    vector = g.node(Op.MUL, x, g.constant("v", [1.0, 2.0, 3.0]))
    scaled = g.node(Op.MUL, vector, g.constant("two", 2.0))
    flipped = g.node(Op.DIV, g.constant("one", 1.0), x)
    y = g.node(Op.ADD, scaled, g.node(Op.MUL, flipped, g.constant("half", 0.5)), out="y")
    graph = g.build(y)

    folded = apply_checked(fold_constants, graph)

    assert folded.nodes == graph.nodes


def test_division_by_zero_folds_like_multiplying_by_infinity():
    g = GraphBuilder()
    x = g.input("x", 3)
    y = g.node(Op.DIV, g.node(Op.MUL, x, g.constant("two", 2.0)), g.constant("zero", 0.0), out="y")
    graph = g.build(y)

    folded = apply_checked(fold_constants, graph)

    (node,) = folded.nodes
    assert np.isposinf(folded.constants[node.inputs[1]])
