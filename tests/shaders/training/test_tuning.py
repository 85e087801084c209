"""The knobs of the training kernels (`coopnn.shaders.training.tuning`): what `Tuning` accepts, that each knob
reaches its kernel and every tuned kernel passes spirv-val (no GPU), and on the GPU tuned sessions against the numpy
oracle (outputs, gradients, 20-step curves, widths that are not multiples of 16)."""

from __future__ import annotations

import pytest

from coopnn.backends.coopvec.tiled_step import tiled_step_shader
from coopnn.nets.builders import mlp_graph
from coopnn.shaders.training import coopmat_blocks as blocks, coopmat_gradients as cg
from coopnn.shaders.training.layout import DELTA_LAYOUTS, ParameterLayout, TapeLayout
from coopnn.shaders.training.tuning import DEFAULT, Tuning, tuning_for
from coopnn.train.gpu.plan import plan_training
from coopnn.train.gpu.step_program import step_program
from coopnn.train.gpu.tiling import Tiling, padded, tiling_for, unsupported_reason
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam
from tests.backends.coopvec.oracle import assert_matches_on_random_data, rounded
from tests.backends.portable.test_target import spirv_val

LAYOUTS = {
    "mlp_32": ParameterLayout.of([("w0", "b0", 64, 32), ("w1", "b1", 64, 64), ("w2", "b2", 16, 64)]),
    "odd_rows": ParameterLayout.of([("w0", "b0", 24, 8), ("w1", "b1", 8, 24)]),
    "wide": ParameterLayout.of([("w0", "b0", 128, 136), ("w1", "b1", 8, 128)]),
}
GRADIENT_TUNINGS = [Tuning(gradient_subgroups=s, staged=staged) for s in (2, 4, 8) for staged in (None, True)] + [
    Tuning(row_tiles=8, column_tiles=2, staged=True, gradient_subgroups=4), Tuning(row_tiles=1, column_tiles=2)]
STEP_TUNINGS = [Tuning(step_samples=128, step_invocations=128), Tuning(step_samples=32, step_invocations=256),
                Tuning(step_samples=128, step_invocations=256, in_place=False), Tuning(step_samples=64, in_place=False),
                Tuning(step_invocations=256, step_row_groups=True),
                Tuning(step_samples=128, step_invocations=512, step_row_groups=True), Tuning(lean_barrier=True)]


def test_tuning_refuses_what_no_kernel_takes():
    with pytest.raises(ValueError, match="deltas"):
        Tuning(deltas="rows")
    with pytest.raises(ValueError, match="gradient_subgroups"):
        Tuning(gradient_subgroups=3)
    with pytest.raises(ValueError, match="chunk_tiles"):
        Tuning(chunk_tiles=0)


def test_the_default_tuning_describes_itself_and_models_without_measurements_take_it():
    assert DEFAULT.describe() == "default"
    assert Tuning(gradient_subgroups=4, in_place=False).describe() == "in_place=False gradient_subgroups=4"
    assert tuning_for([(64, 3), (64, 64), (3, 64)]) == DEFAULT


@pytest.mark.parametrize("name", sorted(LAYOUTS))
@pytest.mark.parametrize("tuning", GRADIENT_TUNINGS, ids=Tuning.describe)
def test_tuned_coopmat_gradients_pass_spirv_val(name, tuning, tmp_path):
    layout = LAYOUTS[name]
    for deltas in DELTA_LAYOUTS:
        shader = cg.coopmat_gradient_shader(layout, TapeLayout(layout.layers, deltas), tuning)
        spirv_val(shader.spirv, tmp_path)
        assert shader.workgroup_size == (32 * tuning.gradient_subgroups, 1, 1)
        assert (b"staged_inputs" in shader.spirv) == bool(tuning.staged or any(
            b.row_tiles >= cg.STAGED_FROM_ROW_TILES for b in blocks.tuned_blocks(layout, tuning)))


def test_subgroups_a_work_group_keep_the_chunks_and_fill_the_device_with_fewer_samples_a_chunk():
    layout = LAYOUTS["mlp_32"]
    one, four = blocks.chunking(layout, 1 << 18), blocks.chunking(layout, 1 << 18, Tuning(gradient_subgroups=4))
    assert four[0] >= one[0] and four[1] <= one[1]
    assert blocks.chunking(layout, 1 << 18, Tuning(chunk_tiles=32)) == (32, (1 << 18) // 512)
    for tuning in (Tuning(gradient_subgroups=4), Tuning(chunk_tiles=16), Tuning(target_subgroups=6144)):
        for count in (32, 1000, 1 << 16, 1 << 18):
            assert blocks.chunking(layout, count, tuning)[1] <= blocks.most_chunks(layout, 1 << 18, tuning)
    assert blocks.task_count(layout, Tuning(row_tiles=1, column_tiles=2)) == 4 + 4 * 2 + 1 * 2


def _step(graph, tuning, deltas="samples"):
    plan = plan_training(graph)
    layout = ParameterLayout.of([(p.weight, p.bias, padded(p.rows), padded(p.cols)) for p in plan.layers])
    tape = TapeLayout(layout.layers, deltas)
    return tiled_step_shader(step_program(plan, get_loss("l2"), tape), plan, get_loss("l2"), layout, tape,
                             tuning=tuning)


@pytest.mark.parametrize("tuning", STEP_TUNINGS, ids=Tuning.describe)
def test_tuned_tiled_steps_pass_spirv_val_in_either_delta_layout(tuning, tmp_path):
    graph = mlp_graph(5, [64, 40], 3, activation="relu")
    tiling = tiling_for(plan_training(graph), tuning=tuning)
    assert tiling.samples == (tuning.step_samples or 64) and tiling.invocations == (tuning.step_invocations or 128)
    for deltas in DELTA_LAYOUTS:
        shader = _step(graph, tuning, deltas)
        spirv_val(shader.spirv, tmp_path)
        assert shader.workgroup_size[0] * shader.workgroup_size[1] == tiling.invocations


def test_a_tiling_the_kernel_cannot_take_is_refused_with_the_reason():
    plan = plan_training(mlp_graph(5, [64, 64], 3, activation="relu"))
    assert tiling_for(plan, tuning=Tuning(in_place=True, step_invocations=64)) == Tiling(64, True, 64)
    assert "needs a subgroup a column tile" in unsupported_reason(plan, get_loss("l2"), 49152,
                                                                  tuning=Tuning(in_place=True, step_invocations=64))
    assert "whole 16s" in unsupported_reason(plan, get_loss("l2"), 49152, tuning=Tuning(step_samples=24))
    assert "workgroup memory" in unsupported_reason(plan, get_loss("l2"), 49152,
                                                    tuning=Tuning(step_samples=512, step_invocations=512))
    assert "only a tiling in place" in unsupported_reason(plan, get_loss("l2"), 49152,
                                                          tuning=Tuning(in_place=False, step_row_groups=True))


def test_a_lean_barrier_leaves_the_storage_barrier_only_where_the_backward_pass_reads_the_tape():
    relu, tanh = (mlp_graph(5, [64, 40], 3, activation=a) for a in ("relu", "tanh"))
    # ReLU in place keeps sign bits and reads no tape; tanh reads the derivative its forward pass stored
    assert _step(relu, Tuning(lean_barrier=True)).spirv != _step(relu, DEFAULT).spirv
    assert _step(tanh, Tuning(lean_barrier=True)).spirv == _step(tanh, DEFAULT).spirv
    two_buffers = Tuning(lean_barrier=True, in_place=False)  # ReLU's output read back from the tape
    assert _step(relu, two_buffers).spirv == _step(relu, Tuning(in_place=False)).spirv


def test_split_rows_give_the_idle_subgroups_row_tiles_and_keep_relus_sign_bits():
    graph = mlp_graph(5, [64, 40], 3, activation="relu")
    split = _step(graph, Tuning(step_invocations=256, step_row_groups=True))
    assert split.workgroup_size == (64, 4, 1)
    # two groups of two row tiles on 64-wide layers: half the product variables of a subgroup taking all four
    assert split.spirv.count(b"product") < _step(graph, Tuning(step_invocations=256)).spirv.count(b"product")
    assert b"signs_" in split.spirv


# ----- on the GPU ----------------------------------------------------------------------------------------------------

# (inputs, hidden, outputs, samples): ragged widths and batches; a 128-row layer, whose blocks stage the tape (and
# whose tile of 128 samples in place is more than workgroup memory holds: the step tilings go to the first model)
MODELS = [(5, [40, 24], 6, 777), (6, [128, 72], 17, 500)]
GRADIENT_GPU_TUNINGS = [Tuning(gradient_subgroups=4), Tuning(gradient_subgroups=8, staged=True),
                        Tuning(row_tiles=8, column_tiles=2, staged=True, gradient_subgroups=4),
                        Tuning(row_tiles=4, column_tiles=4, gradient_subgroups=4), Tuning(row_tiles=1, column_tiles=2),
                        Tuning(chunk_tiles=16, gradient_subgroups=8), Tuning(deltas="features"),
                        Tuning(deltas="features", gradient_subgroups=4, staged=True)]
GPU_CASES = ([(*model, tuning) for model in MODELS for tuning in GRADIENT_GPU_TUNINGS]
             + [(*MODELS[0], tuning) for tuning in STEP_TUNINGS])


@pytest.mark.gpu
@pytest.mark.parametrize("inputs, hidden, outputs, samples, tuning", GPU_CASES,
                         ids=lambda v: v.describe() if isinstance(v, Tuning) else None)
def test_tuned_sessions_match_the_numpy_step(coopvec_device, inputs, hidden, outputs, samples, tuning):
    from coopnn.backends.coopvec.training import CoopvecTrainingSession

    graph = rounded(mlp_graph(inputs, hidden, outputs, activation="relu"))
    session = CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None, step="tiled", tuning=tuning)
    assert session.step_method.name == "tiled" and session.tuning == tuning
    assert_matches_on_random_data(session, graph, "l2", inputs, outputs, samples)


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16"])
def test_the_benchmark_models_train_as_the_oracle_with_the_tuning_they_take(coopvec_device, model):
    import coopnn
    from coopnn.backends.coopvec.training import CoopvecTrainingSession
    from tests.conftest import ROOT

    graph = rounded(coopnn.load(ROOT / "models" / f"{model}.onnx", backend="numpy").graph)
    session = CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None)
    assert session.tuning == tuning_for((layer.rows, layer.cols) for layer in plan_training(graph).layers)
    inputs, outputs = graph.inputs[0].shape[1], graph.outputs[0].shape[1]
    assert_matches_on_random_data(session, graph, "l2", inputs, outputs, 1000)
