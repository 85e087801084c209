"""The pass registry and the default pipeline, including a property test over random MLP-like graphs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coopnn.errors import CompileError
from coopnn.graph.ir import Graph, Op
from coopnn.graph.passes import DEFAULT_PIPELINE, PASSES, optimize, run_pass
from tests.graph.passes.conftest import GraphBuilder, checked_pipeline, op_list

ACTIVATIONS = [
    (Op.RELU, {}),
    (Op.LEAKY_RELU, {"alpha": 0.1}),
    (Op.ELU, {"alpha": 0.7}),
    (Op.SELU, {}),
    (Op.SIGMOID, {}),
    (Op.HARD_SIGMOID, {}),
    (Op.HARD_SWISH, {}),
    (Op.TANH, {}),
    (Op.SOFTPLUS, {"beta": 2.0, "threshold": 5.0}),
    (Op.SOFTSIGN, {}),
    (Op.GELU, {}),
    (Op.GELU, {"approximate": "tanh"}),
    (Op.SILU, {}),
    (Op.MISH, {}),
    (Op.CLIP, {"min": 0.0, "max": 6.0}),
    (Op.SIN, {}),
    (Op.ABS, {}),
]
LAYER_FORMS = ("gemm", "matmul", "matmul_add", "transposed_weight_add", "linear")


@dataclass(frozen=True)
class LayerPlan:
    """One dense layer of a random MLP and the clutter an exporter might write around it."""

    width: int
    form: str  # one of LAYER_FORMS
    bias_shape: str  # "vector" [m], "row" [1, m], "scalar" [1], or "none" (Gemm without C; MatMul forms add one)
    trans_b: int
    alpha: float
    beta: float
    identity: bool  # an Identity between the layer and its activation
    export: bool  # the pre-activation result is also a graph output (hidden layers only)
    activation: tuple[Op, dict] | None
    scale: tuple[float, float] | None  # the activated result is divided by one scalar and multiplied by another


def test_every_pipeline_pass_is_registered():
    assert set(DEFAULT_PIPELINE) <= set(PASSES)
    assert set(PASSES) == {"fold_constants", "fuse_linear", "recognize_activations", "fuse_activation", "dead_code",
                           "infer_shapes"}


def test_unknown_pass_names_are_compile_errors_listing_the_passes():
    graph = exported_mlp()
    with pytest.raises(CompileError, match="'fuse_everything'.*fold_constants, fuse_linear"):
        run_pass("fuse_everything", graph)
    with pytest.raises(CompileError, match="'fuse_everything'"):
        optimize(graph, ["dead_code", "fuse_everything"])


def test_an_exported_gemm_relu_mlp_becomes_linear_nodes_with_activations():
    graph = exported_mlp()

    optimized = checked_pipeline(graph)

    assert op_list(optimized) == [Op.LINEAR] * 3
    assert [n.activation.op if n.activation else None for n in optimized.nodes] == [Op.RELU, Op.RELU, None]
    assert optimized.nodes[-1].outputs == ("y",)
    np.testing.assert_array_equal(optimized.constants[optimized.nodes[0].inputs[1]], graph.constants["w0"])


def test_siren_layers_take_their_frequency_into_the_weights_and_sin_as_activation():
    g = GraphBuilder("siren")
    h = g.input("p", 3)
    for i, (width, fan_in) in enumerate([(16, 3), (16, 16)]):
        h = g.node(Op.GEMM, h, g.weight(f"w{i}", width, fan_in), g.weight(f"b{i}", width), trans_b=1)
        # SIREN uses 30; a power of two keeps this comparison free of sin's sensitivity to rounding at large arguments
        h = g.node(Op.SIN, g.node(Op.MUL, h, g.constant(f"omega{i}", 4.0)))
    y = g.node(Op.GEMM, h, g.weight("w_out", 1, 16), g.weight("b_out", 1), trans_b=1, out="sdf")
    graph = g.build(y)

    optimized = checked_pipeline(graph)

    assert op_list(optimized) == [Op.LINEAR] * 3
    assert [n.activation.op if n.activation else None for n in optimized.nodes] == [Op.SIN, Op.SIN, None]
    np.testing.assert_array_equal(optimized.constants[optimized.nodes[0].inputs[1]], 4.0 * graph.constants["w0"])


def test_optimize_runs_exactly_the_pipeline_it_is_given():
    graph = exported_mlp()

    only_linear = optimize(graph, ["fuse_linear"])

    assert op_list(only_linear).count(Op.LINEAR) == 3
    assert Op.RELU in op_list(only_linear)
    assert optimize(graph, []) is graph


def exported_mlp() -> Graph:
    """What an exporter writes for 3 -> 8 ReLU -> 8 ReLU -> 2: Gemm(transB=1) layers, Identity on the output."""
    g = GraphBuilder("exported")
    h = g.input("x", 3)
    for i, (width, fan_in) in enumerate([(8, 3), (8, 8), (2, 8)]):
        h = g.node(Op.GEMM, h, g.weight(f"w{i}", width, fan_in), g.weight(f"b{i}", width), trans_b=1)
        if i < 2:
            h = g.node(Op.RELU, h)
    return g.build(g.node(Op.IDENTITY, h, out="y"))


@st.composite
def layer_plans(draw, hidden: bool) -> LayerPlan:
    return LayerPlan(
        width=draw(st.integers(1, 12)),
        form=draw(st.sampled_from(LAYER_FORMS)),
        bias_shape=draw(st.sampled_from(["vector", "row", "scalar", "none"])),
        trans_b=draw(st.sampled_from([0, 1])),
        alpha=draw(st.sampled_from([1.0, 2.0, -0.5, 0.3])),
        beta=draw(st.sampled_from([1.0, 0.5, -2.0])),
        identity=draw(st.booleans()),
        export=hidden and draw(st.booleans()),
        activation=draw(st.none() | st.sampled_from(ACTIVATIONS)),
        scale=draw(st.none() | st.tuples(st.sampled_from([2.0, -4.0, 3.0]), st.sampled_from([0.5, 1.5, -2.0]))),
    )


@st.composite
def mlp_plans(draw) -> tuple[int, list[LayerPlan], int]:
    depth = draw(st.integers(1, 4))
    layers = [draw(layer_plans(hidden=i < depth - 1)) for i in range(depth)]
    return draw(st.integers(1, 8)), layers, draw(st.integers(0, 2**16))


def build_layer(g: GraphBuilder, x: str, plan: LayerPlan, i: int) -> str:
    """One dense layer written in `plan.form`, ending in its pre-activation result."""
    width, fan_in = plan.width, g.values[x].shape[-1]
    bias_shape = {"vector": (width,), "row": (1, width), "scalar": (1,), "none": (width,)}[plan.bias_shape]
    if plan.form == "gemm":
        b = g.weight(f"B{i}", *((width, fan_in) if plan.trans_b else (fan_in, width)))
        c = [] if plan.bias_shape == "none" else [g.weight(f"C{i}", *bias_shape)]
        return g.node(Op.GEMM, x, b, *c, alpha=plan.alpha, beta=plan.beta, trans_a=0, trans_b=plan.trans_b)
    if plan.form == "linear":
        return g.node(Op.LINEAR, x, g.weight(f"W{i}", width, fan_in), g.weight(f"b{i}", width))
    if plan.form == "transposed_weight_add":
        weight = g.node(Op.TRANSPOSE, g.weight(f"W{i}", width, fan_in), perm=(1, 0))
    else:
        weight = g.weight(f"W{i}", fan_in, width)
    h = g.node(Op.MATMUL, x, weight)
    return h if plan.form == "matmul" else g.node(Op.ADD, h, g.weight(f"b{i}", *bias_shape))


def build_mlp(in_width: int, layers: list[LayerPlan], seed: int) -> Graph:
    g = GraphBuilder("random_mlp", seed=seed)
    outputs = []
    h = g.input("x", in_width)
    for i, plan in enumerate(layers):
        h = build_layer(g, h, plan, i)
        if plan.identity or plan.export:
            h = g.node(Op.IDENTITY, h, out=f"pre{i}" if plan.export else None)
            outputs += [h] if plan.export else []
        if plan.activation:
            op, attrs = plan.activation
            h = g.node(op, h, **attrs)
        if plan.scale:
            h = g.node(Op.DIV, h, g.constant(f"d{i}", plan.scale[0]))
            h = g.node(Op.MUL, g.constant(f"m{i}", [plan.scale[1]]), h)
    return g.build(g.node(Op.IDENTITY, h, out="y"), *outputs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mlp_plans())
def test_random_mlps_keep_their_outputs_and_fuse_into_one_linear_per_layer(plan):
    in_width, layers, seed = plan
    graph = build_mlp(in_width, layers, seed)

    optimized = checked_pipeline(graph)

    counts = Counter(op_list(optimized))
    separate_activations = sum(1 for layer in layers if layer.activation and layer.export)
    assert counts[Op.LINEAR] == len(layers)
    # a scale right after the LINEAR is folded into it; after an activation or a returned result it stays a Mul
    assert counts[Op.MUL] == sum(bool(layer.scale and (layer.activation or layer.export)) for layer in layers)
    assert sum(counts.values()) == len(layers) + counts[Op.MUL] + separate_activations
