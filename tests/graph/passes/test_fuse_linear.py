"""fuse_linear: MatMul and Gemm against constant weights become LINEAR; constant Adds and Muls after one fold in."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.graph.ir import Activation, Op
from coopnn.graph.passes.fuse_linear import fuse_linear
from tests.graph.passes.conftest import GraphBuilder, apply_checked, op_list


def linear_parts(graph, output):
    """The weight and bias arrays of the LINEAR producing `output` (bias None when absent)."""
    node = graph.producers()[output]
    assert node.op is Op.LINEAR
    weight = graph.constants[node.inputs[1]]
    bias = graph.constants[node.inputs[2]] if len(node.inputs) == 3 else None
    return weight, bias


@pytest.mark.parametrize("bias_shape", [(5,), (1, 5), (1,), ()])
@pytest.mark.parametrize("bias_first", [False, True])
def test_matmul_then_add_becomes_one_linear(bias_shape, bias_first):
    g = GraphBuilder()
    x = g.input("x", 3)
    w = g.weight("w", 3, 5)
    b = g.constant("b", np.arange(np.prod(bias_shape, dtype=int), dtype=np.float32).reshape(bias_shape) + 0.5)
    h = g.node(Op.MATMUL, x, w)
    y = g.node(Op.ADD, *((b, h) if bias_first else (h, b)), out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    assert op_list(fused) == [Op.LINEAR]
    weight, bias = linear_parts(fused, "y")
    np.testing.assert_array_equal(weight, graph.constants["w"].T)
    np.testing.assert_array_equal(bias, np.broadcast_to(graph.constants["b"].reshape(-1), (5,)))
    assert fused.nodes[0].name == "n_" + h
    assert set(fused.constants) == {fused.nodes[0].inputs[1], fused.nodes[0].inputs[2]}


def test_matmul_over_extra_feature_axes_takes_a_per_column_bias():
    g = GraphBuilder()
    x = g.input("x", 4, 3)
    y = g.node(Op.ADD, g.node(Op.MATMUL, x, g.weight("w", 3, 2)), g.constant("b", [[[1.0, -1.0]]]), out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    assert op_list(fused) == [Op.LINEAR]
    np.testing.assert_array_equal(linear_parts(fused, "y")[1], [1.0, -1.0])


def test_add_that_varies_along_another_feature_axis_stays_an_add():
    g = GraphBuilder()
    x = g.input("x", 4, 3)
    y = g.node(Op.ADD, g.node(Op.MATMUL, x, g.weight("w", 3, 2)), g.weight("b", 4, 1), out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    assert op_list(fused) == [Op.LINEAR, Op.ADD]


def test_gemm_alpha_beta_and_trans_b_fold_exactly():
    g = GraphBuilder()
    x = g.input("x", 3)
    b = g.weight("B", 4, 3)
    c = g.weight("C", 4)
    y = g.node(Op.GEMM, x, b, c, alpha=2.0, beta=0.5, trans_a=0, trans_b=1, out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    assert op_list(fused) == [Op.LINEAR]
    weight, bias = linear_parts(fused, "y")
    np.testing.assert_array_equal(weight, 2.0 * graph.constants["B"])
    np.testing.assert_array_equal(bias, 0.5 * graph.constants["C"])
    assert weight.dtype == bias.dtype == np.float32


@pytest.mark.parametrize("c_shape", [None, (1, 4), (1,), (1, 1)])
def test_gemm_without_trans_b_and_with_any_bias_form(c_shape):
    g = GraphBuilder()
    x = g.input("x", 3)
    inputs = [x, g.weight("B", 3, 4)] + ([g.weight("C", *c_shape)] if c_shape else [])
    y = g.node(Op.GEMM, *inputs, alpha=0.25, out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    weight, bias = linear_parts(fused, "y")
    np.testing.assert_array_equal(weight, 0.25 * graph.constants["B"].T)
    assert (bias is None) == (c_shape is None)


def test_add_after_a_gemm_with_bias_sums_into_the_bias():
    g = GraphBuilder()
    x = g.input("x", 3)
    h = g.node(Op.GEMM, x, g.weight("B", 4, 3), g.constant("C", [1.0, 2.0, 3.0, 4.0]), trans_b=1)
    h = g.node(Op.ADD, h, g.constant("more", [10.0, 20.0, 30.0, 40.0]))
    y = g.node(Op.ADD, g.constant("scalar", 100.0), h, out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    assert op_list(fused) == [Op.LINEAR]
    np.testing.assert_array_equal(linear_parts(fused, "y")[1], [111.0, 122.0, 133.0, 144.0])


def test_add_folds_into_a_linear_the_importer_already_made():
    g = GraphBuilder()
    x = g.input("x", 3)
    h = g.node(Op.LINEAR, x, g.weight("w", 2, 3), g.constant("b", [[1.0, 2.0]]))
    y = g.node(Op.ADD, h, g.constant("more", [0.5, 0.25]), out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    assert op_list(fused) == [Op.LINEAR]
    weight, bias = linear_parts(fused, "y")
    assert weight is graph.constants["w"]
    np.testing.assert_array_equal(bias, [1.5, 2.25])


def test_gemm_with_a_batched_c_stays_a_gemm():
    g = GraphBuilder()
    x = g.input("x", 3)
    skip = g.input("skip", 4)
    y = g.node(Op.GEMM, x, g.weight("B", 3, 4), skip, out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    assert fused.nodes == graph.nodes


def test_matmul_with_a_computed_right_side_stays_until_it_is_folded():
    g = GraphBuilder()
    x = g.input("x", 3)
    w = g.node(Op.TRANSPOSE, g.weight("w_t", 4, 3), perm=(1, 0))
    y = g.node(Op.MATMUL, x, w, out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    assert op_list(fused) == [Op.TRANSPOSE, Op.MATMUL]


def test_add_is_not_folded_when_the_linear_result_is_read_elsewhere():
    g = GraphBuilder()
    x = g.input("x", 3)
    h = g.node(Op.MATMUL, x, g.weight("w", 3, 2), out="h")
    y = g.node(Op.ADD, h, g.constant("b", [1.0, 2.0]), out="y")
    z = g.node(Op.RELU, h, out="z")
    returned = g.build(y, h)
    shared = g.build(y, z)

    for graph in (returned, shared):
        fused = apply_checked(fuse_linear, graph)
        assert op_list(fused)[:2] == [Op.LINEAR, Op.ADD]


@pytest.mark.parametrize("op", [Op.ADD, Op.MUL])
@pytest.mark.parametrize("activation", [None, Activation(Op.RELU)])
def test_add_or_mul_of_a_batched_value_or_after_an_activation_stays(op, activation):
    g = GraphBuilder()
    x = g.input("x", 2)
    h = g.node(Op.LINEAR, x, g.weight("w", 2, 2), activation=activation)
    other = x if activation is None else g.constant("b", [1.0, 2.0])
    y = g.node(op, h, other, out="y")
    graph = g.build(y)

    assert op_list(apply_checked(fuse_linear, graph)) == [Op.LINEAR, op]


def test_matmuls_sharing_a_weight_share_its_transpose():
    g = GraphBuilder()
    a, b = g.input("a", 3), g.input("b", 3)
    w = g.weight("w", 3, 3)
    y = g.node(Op.ADD, g.node(Op.MATMUL, a, w), g.node(Op.MATMUL, b, w), out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    first, second, _ = fused.nodes
    assert first.inputs[1] == second.inputs[1]
    assert len(fused.constants) == 1


def test_created_constants_get_names_no_other_value_has():
    g = GraphBuilder()
    x = g.input("x", 3)
    taken = g.constant("w_t", [0.0, 1.0, 2.0])
    y = g.node(Op.MATMUL, g.node(Op.ADD, x, taken), g.weight("w", 3, 3), out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    assert fused.nodes[1].inputs[1] == "w_t_1"
    np.testing.assert_array_equal(fused.constants["w_t"], graph.constants["w_t"])


@pytest.mark.parametrize("factor", [30.0, [[0.5, -2.0, 4.0]]])
def test_mul_by_a_per_output_constant_scales_weight_rows_and_bias(factor):
    g = GraphBuilder()
    x = g.input("x", 2)
    h = g.node(Op.GEMM, x, g.weight("B", 3, 2), g.weight("C", 3), trans_b=1)
    y = g.node(Op.MUL, g.constant("factor", factor), h, out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    assert op_list(fused) == [Op.LINEAR]
    weight, bias = linear_parts(fused, "y")
    scale = np.broadcast_to(np.reshape(factor, -1), (3,)).astype(np.float32)
    np.testing.assert_array_equal(weight, graph.constants["B"] * scale[:, None])
    np.testing.assert_array_equal(bias, graph.constants["C"] * scale)


def test_mul_of_a_bias_free_linear_adds_no_bias():
    g = GraphBuilder()
    x = g.input("x", 2)
    y = g.node(Op.MUL, g.node(Op.MATMUL, x, g.weight("w", 2, 3)), g.constant("half", 0.5), out="y")
    graph = g.build(y)

    fused = apply_checked(fuse_linear, graph)

    weight, bias = linear_parts(fused, "y")
    assert bias is None
    np.testing.assert_array_equal(weight, 0.5 * graph.constants["w"].T)


def test_mul_by_an_infinite_factor_stays_a_mul():
    g = GraphBuilder()
    x = g.input("x", 2)
    y = g.node(Op.MUL, g.node(Op.MATMUL, x, g.weight("w", 2, 3)), g.constant("inf", np.inf), out="y")
    graph = g.build(y)

    assert op_list(apply_checked(fuse_linear, graph)) == [Op.LINEAR, Op.MUL]
