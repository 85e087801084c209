"""Reverse mode over the graph IR: parameter gradients of small graphs per operator, of every zoo model and of
`mlp` models against central differences in float64; which nodes are visited; CompileError for the rest."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.errors import CompileError
from coopnn.graph.ir import Activation, Op
from coopnn.train.backward import GradientProgram, RULES
from coopnn.graph.builder import GraphBuilder
from coopnn.nets.builders import mlp_graph
from tests.conftest import ROOT, ZOO, zoo_ids
from tests.train.conftest import check_gradients

rng = np.random.default_rng(7)


def _builder(width: int = 4) -> tuple[GraphBuilder, str, str]:
    """A graph with input x [batch, 3] and two trainable hidden values a, b [batch, width]."""
    b = GraphBuilder("g")
    x = b.input("x", 3)
    hidden = []
    for name in ("a", "b"):
        weight = b.constant(f"{name}.w", rng.uniform(-1, 1, (width, 3)))
        bias = b.constant(f"{name}.bias", rng.uniform(-1, 1, width))
        hidden.append(b.node(Op.LINEAR, name, [x, weight, bias]))
    return b, hidden[0], hidden[1]


def _sigmoid_builder() -> tuple[GraphBuilder, str, str]:
    """Like _builder, with a in (0, 1) (a sigmoid LINEAR), for operators that need a positive operand."""
    b = GraphBuilder("g")
    x = b.input("x", 3)
    a = b.node(Op.LINEAR, "a", [x, b.constant("a.w", rng.uniform(-1, 1, (4, 3)))], activation=Activation(Op.SIGMOID))
    h = b.node(Op.LINEAR, "b", [x, b.constant("b.w", rng.uniform(-1, 1, (4, 3))), b.constant("b.b", np.ones(4))])
    return b, a, h


def _binary(op):
    def build():
        b, a, h = _sigmoid_builder() if op in (Op.POW, Op.DIV) else _builder()
        if op is Op.DIV:
            h = b.node(Op.ADD, "shifted", [a, b.constant("one", np.ones(4))])  # a divisor away from zero
            a = b.node(Op.LINEAR, "numerator", [b.inputs[0].name, b.constant("n.w", rng.uniform(-1, 1, (4, 3)))])
        return b.graph([b.node(op, "op", [a, h])])

    return build


def _with_constant(op, shape):
    def build():
        b, a, _ = _builder()
        c = b.constant("c", rng.uniform(0.5, 1.5, shape))
        return b.graph([b.node(op, "op", [a, c]), b.node(op, "op2", [c, a])])

    return build


def _prelu():
    b, a, _ = _builder()
    return b.graph([b.node(Op.PRELU, "op", [a, b.constant("slope", rng.uniform(0.1, 0.5, 4))])])


def _where():
    b, a, h = _builder()
    condition = b.node(Op.GREATER, "cmp", [a, h])
    return b.graph([b.node(Op.WHERE, "op", [condition, a, b.constant("c", np.full(4, 0.25))])])


def _shapes():
    b, a, h = _builder(6)
    joined = b.node(Op.CONCAT, "cat", [a, b.inputs[0].name, h], axis=1)  # the input carries no gradient
    cut = b.node(Op.SLICE, "cut", [joined], axis=1, start=1, stop=14, step=2)
    back = b.node(Op.SLICE, "back", [joined], axis=1, start=12, stop=-1, step=-3)
    cube = b.node(Op.RESHAPE, "cube", [a], shape=(None, 2, 3))
    turned = b.node(Op.TRANSPOSE, "turn", [cube], perm=(0, 2, 1))
    flat = b.node(Op.RESHAPE, "flat", [turned], shape=(None, 6))
    cast = b.node(Op.CAST, "cast", [flat], to="f32")
    return b.graph([cut, back, cast])


def _norms():
    b, a, h = _builder(5)
    soft = b.node(Op.SOFTMAX, "soft", [a], axis=-1)
    log_soft = b.node(Op.LOG_SOFTMAX, "log_soft", [h], axis=1)
    scale, bias = b.constant("ln.scale", rng.uniform(0.5, 1.5, 5)), b.constant("ln.bias", rng.uniform(-1, 1, 5))
    norm = b.node(Op.LAYER_NORM, "ln", [b.node(Op.MUL, "prod", [a, h]), scale, bias], axis=-1, epsilon=1e-5)
    return b.graph([soft, log_soft, norm])


def _reductions():
    b, a, h = _builder(6)
    cube = b.node(Op.RESHAPE, "cube", [a], shape=(None, 2, 3))
    outputs = [b.node(Op.REDUCE_SUM, "sum", [cube], axes=(2,), keepdims=False),
               b.node(Op.REDUCE_MEAN, "mean", [cube], axes=(1, 2), keepdims=True),
               b.node(Op.REDUCE_MAX, "max", [h], axes=(1,), keepdims=True),
               b.node(Op.REDUCE_MIN, "min", [cube], axes=(1,), keepdims=False)]
    return b.graph(outputs)


GRAPHS = {
    **{f"binary_{op.value}": _binary(op) for op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW, Op.MAX, Op.MIN)},
    "add_broadcast_constant": _with_constant(Op.ADD, (4,)),
    "mul_broadcast_row_constant": _with_constant(Op.MUL, (1, 4)),
    "div_by_constant": _with_constant(Op.DIV, (4,)),
    "prelu_with_trainable_slope": _prelu,
    "where": _where,
    "concat_slice_reshape_transpose_cast": _shapes,
    "softmax_log_softmax_layer_norm": _norms,
    "reductions": _reductions,
}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_operator_gradients_match_central_differences(float64_ops, name):
    assert check_gradients(GRAPHS[name]()) > 0


@pytest.mark.parametrize("activation", ["relu", "gelu", "silu", "tanh", "softplus", "sin", "elu"])
def test_mlp_gradients_match_central_differences(float64_ops, activation):
    graph = mlp_graph(2, [8, 8], 3, activation=activation, output_activation="sigmoid", encoding="frequency",
                      octaves=3, seed=1)
    check_gradients(graph, batch=7, entries=8)


# relative_l2 is left out: its gradient treats the denominator as a constant on purpose (see test_losses)
@pytest.mark.parametrize("loss", ["l1", "huber", "bce_with_logits"])
def test_gradients_through_each_loss(float64_ops, loss):
    check_gradients(mlp_graph(3, [6], 2, activation="tanh", seed=2), loss=loss)


@pytest.mark.parametrize("path", ZOO, ids=zoo_ids())
def test_zoo_model_gradients_match_central_differences(float64_ops, path):
    with coopnn.load(path, backend="numpy") as model:
        check_gradients(model.graph, batch=4, entries=3)


def test_every_layer_of_the_gelu_silu_network_has_gradients_matching_central_differences(float64_ops):
    # its GELUs (exact and tanh) and SiLU are written out in arithmetic; the loaded graph holds them as activations
    with coopnn.load(ROOT / "models" / "gelu_silu_mlp.onnx", backend="numpy") as model:
        graph = model.graph
    assert [node.activation.op if node.activation else None for node in graph.nodes] == [Op.GELU, Op.GELU, Op.SILU,
                                                                                          None]
    assert sorted(GradientProgram(graph).parameters) == sorted(
        f"{node.name}.{role}" for node in graph.nodes for role in ("weight", "bias"))
    check_gradients(graph, batch=6, entries=10)


def test_shared_output_and_hidden_value_accumulates():
    # a hidden value that is both an output and read by a later layer gets both gradients
    b, a, _ = _builder()
    second = b.node(Op.LINEAR, "second", [a, b.constant("s.w", rng.uniform(-1, 1, (2, 4)))])
    graph = b.graph([a, second])
    program = GradientProgram(graph)
    assert [n.name for n in program.visited] == ["a", "second"]


def test_nodes_on_inputs_only_are_not_visited():
    program = GradientProgram(mlp_graph(2, [4], 1, encoding="frequency"))
    assert [n.op for n in program.visited] == [Op.LINEAR, Op.LINEAR]
    assert set(program.parameters) == {"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"}


def test_comparison_feeding_where_needs_no_rule():
    program = GradientProgram(_where())
    assert "cmp" not in {n.name for n in program.visited}


@pytest.mark.parametrize("op", [Op.FLOOR, Op.SIGN])
def test_training_through_a_non_differentiable_node_names_it(op):
    b, a, _ = _builder()
    graph = b.graph([b.node(op, "quantise", [a])])
    pattern = r"node 'quantise' \(" + op.value + r"\).*Differentiable operators: .*linear"
    with pytest.raises(CompileError, match=pattern):
        GradientProgram(graph)


def test_non_differentiable_activation_on_a_linear_is_named():
    b = GraphBuilder("g")
    x = b.input("x", 2)
    y = b.node(Op.LINEAR, "layer", [x, b.constant("w", np.ones((2, 2)))], activation=Activation(Op.CEIL))
    with pytest.raises(CompileError, match="node 'layer' .*its activation ceil"):
        GradientProgram(b.graph([y]))


def test_non_differentiable_node_away_from_the_parameters_is_fine():
    b, a, _ = _builder()
    floor = b.node(Op.FLOOR, "floor", [b.inputs[0].name])  # on the input only: no parameter reaches it
    w = b.constant("w2", np.ones((4, 3)))
    y = b.node(Op.ADD, "sum", [a, b.node(Op.LINEAR, "l2", [floor, w])])
    assert "floor" not in {n.name for n in GradientProgram(b.graph([y])).visited}


def test_rules_cover_what_mlps_use():
    assert {Op.LINEAR, Op.ADD, Op.MUL, Op.WHERE, Op.CONCAT, Op.SLICE, Op.RESHAPE, Op.TRANSPOSE, Op.SOFTMAX,
            Op.LAYER_NORM, Op.PRELU} <= set(RULES)
    assert Op.MATMUL not in RULES and Op.LESS not in RULES
