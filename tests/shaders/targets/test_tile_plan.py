"""Kernel programs read as chains of stages for the cooperative-matrix tile targets: the stages of the zoo models they
take, the reason they refuse each other zoo model and each shape outside a chain, and the epilogue's numpy meaning."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import CompileError
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.ir import Op
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.layouts.pack import align_up
from coopnn.nets.builders import mlp_graph
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.targets.tile_plan import plan_tiles
from tests.conftest import ROOT, ZOO
from tests.shaders.kernel.test_ops import every_instruction

# Every zoo model the tile targets take; the rest are refused for the reason named.
ACCEPTED = ("activations_zoo", "gelu_silu_mlp", "gelu_silu_opset20", "legacy_encoding_activations", "legacy_gemm_mlp",
            "mlp_32_64x4_16", "mlp_3_64x2_3", "mlp_64_128x4_16", "siren_sdf")
REFUSED = {
    "legacy_layernorm_softmax": "it has 1 input\\(s\\) and 2 output\\(s\\)",
    "nerf_skip_two_heads": "it has 2 input\\(s\\) and 2 output\\(s\\)",
    "neural_material_freq": "it has 3 input\\(s\\) and 1 output\\(s\\)",
    "piecewise_where": "value %0 is used after the next layer began \\(a skip or residual connection\\)",
    "radiance_cache_layernorm": "it has 2 input\\(s\\) and 2 output\\(s\\)",
    "residual_matmul_mlp": "value %3 is used after the next layer began",
    "sdf_softplus": "it has 1 input\\(s\\) and 2 output\\(s\\)",
    "split_heads_legacy": "it has 1 input\\(s\\) and 4 output\\(s\\)",
}


def zoo_program(stem: str):
    return lower(optimize(import_model(ROOT / "models" / f"{stem}.onnx")))


def test_the_lists_cover_the_zoo():
    assert sorted(ACCEPTED + tuple(REFUSED)) == [p.stem for p in ZOO]


@pytest.mark.parametrize("stem", ACCEPTED)
def test_a_chain_has_one_stage_per_linear_after_the_input(stem):
    program = zoo_program(stem)
    plan = plan_tiles(program, "coopmat2")
    products = [i for i in program.body if i.op == "gemv"]
    assert [s.matrix for s in plan.products] == [i.args[0] for i in products]
    start = program.value_types()[products[0].args[1]].size if plan.input_stage else plan.input.shape[0]
    assert plan.stages[0].width == start and plan.stages[-1].width == plan.output.shape[0]
    for before, stage in zip(plan.stages, plan.products):
        assert stage.columns == before.width
    assert all(i.op not in ("gemv", "load", "store") for s in plan.stages for i in s.epilogue)


def test_the_stages_of_a_relu_mlp():
    plan = plan_tiles(zoo_program("mlp_3_64x2_3"), "coopmat")
    assert [(s.width, s.columns, s.matrix, s.bias) for s in plan.stages] == [
        (3, 0, None, None), (64, 3, "w0", "b1"), (64, 64, "w2", "b3"), (3, 64, "w4", "b5")]
    assert [[i.op for i in s.epilogue] for s in plan.stages] == [[], ["max"], ["max"], []]
    assert plan.constants == {"2": 0.0}


@pytest.mark.parametrize("stem, message", sorted(REFUSED.items()))
def test_the_zoo_models_outside_a_chain_are_refused_with_the_reason(stem, message):
    with pytest.raises(CompileError, match=f"the coopmat2 target cannot run kernel '{stem}': {message}"):
        plan_tiles(zoo_program(stem), "coopmat2")


def test_a_training_kernel_is_refused():
    with pytest.raises(CompileError, match="it is a training kernel \\(parameter tape of role tape\\)"):
        plan_tiles(every_instruction(accumulate=False).build(), "coopmat")


def test_an_encoding_without_a_linear_is_refused():
    b = GraphBuilder("no_linear")
    x = b.input("x", 4)
    program = lower(b.graph([b.node(Op.SIN, "s", [x])]))
    with pytest.raises(CompileError, match="it has no Linear layer, so there is no matrix product"):
        plan_tiles(program, "coopmat")


def test_a_per_feature_constant_is_refused():
    b = GraphBuilder("prelu")
    x = b.input("x", 4)
    h = b.node(Op.LINEAR, "fc", [x, b.constant("w", np.ones((3, 4))), b.constant("b", np.zeros(3))])
    y = b.node(Op.PRELU, "act", [h, b.constant("slope", [0.1, 0.2, 0.3])])
    with pytest.raises(CompileError, match="instruction 'load' of the per-feature constant vector c2"):
        plan_tiles(lower(b.graph([y])), "coopmat2")


def test_an_epilogue_on_the_input_is_stage_zero():
    b = GraphBuilder("scaled_input")
    x = b.input("x", 5)
    scaled = b.node(Op.MUL, "scale", [x, b.constant("two", 2.0)])
    y = b.node(Op.LINEAR, "fc", [scaled, b.constant("w", np.ones((3, 5)))])
    plan = plan_tiles(lower(b.graph([y])), "coopmat2")
    assert [i.op for i in plan.stages[0].epilogue] == ["mul"] and plan.stages[1].bias is None
    np.testing.assert_array_equal(plan.stages[0].evaluate(np.array([1.5, -2.0], np.float32), plan.constants),
                                  [3.0, -4.0])


@pytest.mark.parametrize("activation, finite", [("relu", True), ("sigmoid", True), ("tanh", True), ("gelu", True)])
def test_the_epilogue_of_zero_is_finite_for_the_usual_activations(activation, finite):
    plan = plan_tiles(lower(mlp_graph(3, (20,), 2, activation=activation)), "coopmat")
    assert plan.stages[1].finite_at_zero(plan.constants) is finite


def test_an_epilogue_infinite_at_zero_is_found():
    b = GraphBuilder("log_layer")
    x = b.input("x", 4)
    h = b.node(Op.LINEAR, "fc", [x, b.constant("w", np.ones((3, 4)))])
    y = b.node(Op.LINEAR, "out", [b.node(Op.LOG, "log", [h]), b.constant("w2", np.ones((2, 3)))])
    plan = plan_tiles(lower(b.graph([y])), "coopmat")
    assert not plan.stages[1].finite_at_zero(plan.constants)
    np.testing.assert_allclose(plan.stages[1].evaluate(np.array([1.0, np.e], np.float32), plan.constants), [0, 1],
                               atol=1e-7)


def test_an_epilogue_beyond_float16_at_zero_is_found():
    b = GraphBuilder("shifted")
    x = b.input("x", 4)
    h = b.node(Op.LINEAR, "fc", [x, b.constant("w", np.ones((3, 4)))])
    shifted = b.node(Op.ADD, "shift", [h, b.constant("big", 1e5)])
    plan = plan_tiles(lower(b.graph([b.node(Op.LINEAR, "out", [shifted, b.constant("w2", np.ones((2, 3)))])])),
                      "coopmat")
    assert not plan.stages[1].finite_at_zero(plan.constants)  # 1e5 is inf in float16


def test_stage_evaluation_follows_the_kernel_instructions():
    """SiLU (x * sigmoid(x)) through its kernel expansion, and a comparison with a select (Where), as the tile targets
    run them per component."""
    plan = plan_tiles(lower(mlp_graph(2, (4,), 1, activation="silu")), "coopmat2")
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    np.testing.assert_allclose(plan.stages[1].evaluate(x, plan.constants), x / (1 + np.exp(-x)), rtol=1e-6)


def test_padding():
    assert [align_up(n, 16) for n in (1, 16, 17, 64)] == [16, 16, 32, 64]
