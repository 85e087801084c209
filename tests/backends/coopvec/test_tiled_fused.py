"""The fused training step (`coopnn.backends.coopvec.tiled_fused`): spirv-val of its SPIR-V for every activation and
loss the GPU trainer accepts (no GPU), how it shares out its work and what it refuses; on the GPU the gradients and
20-step loss curves against the numpy oracle, with batches of one tile a work-group and of several.

Tolerances are test_training.py's: the fused kernel rounds what the tiled one rounds.
"""

from __future__ import annotations

import pytest

import coopnn
from coopnn.backends.coopvec.tiled_fused import (MAX_GROUPS, FusedTiling, fused_step_shader, fused_tiling,
                                                 groups_for, unsupported_reason)
from coopnn.shaders.training.tiles.passes import row_groups
from coopnn.train.gpu.tiling import padded
from coopnn.errors import CompileError
from coopnn.graph.ir import Op
from coopnn.nets.builders import mlp_graph
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.train.gpu.loss_kernels import LOSS_KERNELS
from coopnn.train.gpu.plan import plan_training
from coopnn.train.gpu.step_program import step_program
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam
from tests.tl.functions.examples import made_activation, made_loss
from tests.backends.coopvec.oracle import assert_matches_on_random_data, rounded
from tests.backends.coopvec.test_tiled_step import EVERY_LOSS, REAL_DOMAIN, TRAINABLE
from tests.backends.portable.test_target import spirv_val
from tests.conftest import ROOT


def _layout(plan, pad=padded):
    return ParameterLayout.of([(p.weight, p.bias, pad(p.rows), pad(p.cols)) for p in plan.layers])


def _compile(graph, loss="l2", shared_memory=49152):
    plan = plan_training(graph)
    return fused_step_shader(step_program(plan, made_loss(loss), TapeLayout(())), plan, made_loss(loss), _layout(plan),
                             shared_memory)


@pytest.mark.parametrize("activation", TRAINABLE)
def test_every_trainable_activation_passes_spirv_val(activation, tmp_path):
    spirv_val(_compile(mlp_graph(3, [24, 40], 5, activation=made_activation(Op(activation)))).spirv, tmp_path)


@pytest.mark.parametrize("loss", sorted(LOSS_KERNELS))
def test_every_loss_passes_spirv_val(loss, tmp_path):
    binary = _compile(mlp_graph(4, [64], 3, activation="relu", encoding="frequency", octaves=3), loss)
    spirv_val(binary.spirv, tmp_path)
    assert binary.workgroup_size == (64, 4, 1)  # two layers: tiles of 64 fit; 256 invocations
    assert [b.role for b in binary.bindings][-1] == "partials"


def test_the_benchmark_models_it_holds_take_tiles_that_fit_the_workgroup_memory():
    for name, samples in [("mlp_32_64x4_16", 32), ("mlp_3_64x2_3", 32)]:
        plan = plan_training(coopnn.load(ROOT / "models" / f"{name}.onnx", backend="numpy").graph)
        assert fused_tiling(plan) == FusedTiling(samples, 256, ())
    # tanh's derivative is not a function of its output alone: a buffer of its own for each hidden layer
    assert fused_tiling(plan_training(mlp_graph(3, [64, 64], 3, activation="tanh"))).slopes == (0, 1)


def test_weight_gradients_too_many_for_registers_are_refused_with_the_reason():
    plan = plan_training(coopnn.load(ROOT / "models" / "mlp_64_128x4_16.onnx", backend="numpy").graph)
    assert "29 16 x 16 accumulators a subgroup" in unsupported_reason(plan, get_loss("l2"))


def test_a_model_too_wide_for_workgroup_memory_is_refused_with_the_reason():
    graph = mlp_graph(3, [48] * 6, 3, activation="tanh")  # 15 buffers of tiles of 32: 53,760 bytes
    assert "workgroup memory" in unsupported_reason(plan_training(graph), get_loss("l2"), 49152)
    with pytest.raises(CompileError, match="workgroup memory"):
        _compile(graph)


def test_layouts_not_padded_to_whole_matrices_are_refused():
    plan = plan_training(mlp_graph(3, [24, 40], 5, activation="relu"))
    with pytest.raises(ValueError, match="padded to whole 16s"):
        fused_step_shader(step_program(plan, get_loss("l2"), TapeLayout(())), plan, get_loss("l2"),
                          _layout(plan, pad=lambda n: n))


@pytest.mark.parametrize("row_tiles, columns, subgroups, groups", [
    (2, 4, 8, 2), (4, 4, 8, 2), (2, 1, 8, 2), (4, 1, 8, 4), (2, 8, 8, 1), (2, 9, 8, 1), (4, 3, 8, 2),
])
def test_row_groups_give_every_subgroup_a_unit_where_the_rows_divide(row_tiles, columns, subgroups, groups):
    assert row_groups(row_tiles, columns, subgroups) == groups


def test_a_step_runs_one_workgroup_a_tile_up_to_the_most_partials():
    assert groups_for(64, 32) == 2
    assert groups_for(MAX_GROUPS * 32 * 3, 32) == MAX_GROUPS
    assert groups_for(0, 32) == 1


# ----- on the GPU ----------------------------------------------------------------------------------------------------

def _session(graph, loss):
    from coopnn.backends.coopvec.training import CoopvecTrainingSession

    return CoopvecTrainingSession(graph, made_loss(loss), Adam(lr=1e-3), None, gradients="fused")


def _compare(graph, loss, inputs, outputs, samples, steps=20):
    session = _session(graph, loss)
    assert session.step_method.name == "fused" and session.tape.width == 0
    assert_matches_on_random_data(session, graph, loss, inputs, outputs, samples, steps)


@pytest.mark.gpu
@pytest.mark.parametrize("inputs, hidden, outputs, activation, loss, samples", EVERY_LOSS + [
    (6, [40, 24], 17, "gelu", "l2", 300),
    # more tiles than work-groups: each work-group adds several tiles into its accumulators
    (3, [64, 64, 64, 64], 16, "relu", "l2", 40000), (5, [48, 40], 6, "tanh", "l2", 30001),
])
def test_fused_step_matches_the_numpy_step(coopvec_device, inputs, hidden, outputs, activation, loss, samples):
    graph = rounded(mlp_graph(inputs, hidden, outputs, activation=activation, encoding="frequency", octaves=3))
    _compare(graph, loss, inputs, outputs, samples)


@pytest.mark.gpu
@pytest.mark.parametrize("activation", REAL_DOMAIN)
def test_fused_gradients_of_every_activation(coopvec_device, activation):
    graph = mlp_graph(3, [24, 40], 5, activation=made_activation(Op(activation)))
    _compare(rounded(graph), "l2", 3, 5, 500, steps=0)


@pytest.mark.gpu
def test_a_fused_request_for_a_model_it_cannot_hold_raises_with_what_to_use(coopvec_device):
    with pytest.raises(CompileError, match="accumulators.*use gradients='coopmat'"):
        _session(mlp_graph(64, [128] * 4, 16, activation="relu"), "l2")
