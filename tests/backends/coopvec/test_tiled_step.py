"""The tiled training-step kernel (`coopnn.backends.coopvec.tiled_step`): spirv-val of its SPIR-V for every activation
and loss the GPU trainer accepts (no GPU), what it refuses, and on the H100 the gradients and 20-step loss curves
against the numpy oracle (widths that are not multiples of 16, ragged batches) and the loss-scale skip path.

Tolerances are test_training.py's: the tiled kernel rounds what the cooperative-vector one rounds, or less (its
pre-activations stay float32).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from coopnn.backends.coopvec.tiled_step import tiled_step_shader
from coopnn.train.gpu.tiling import Tiling, padded, tiling_for, unsupported_reason
from coopnn.errors import CompileError
from coopnn.graph.activations import ACTIVATIONS
from coopnn.graph.ir import Op
from coopnn.nets.builders import mlp_graph
from coopnn.shaders.kernel.derivatives import DERIVATIVES
from coopnn.shaders.training.layout import DELTA_LAYOUTS, ParameterLayout, TapeLayout
from coopnn.train.gpu.loss_kernels import LOSS_KERNELS
from coopnn.train.gpu.plan import plan_training
from coopnn.train.gpu.step_program import step_program
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam
from tests.tl.functions.examples import made_activation, made_loss
from tests.backends.coopvec.oracle import assert_matches_on_random_data, rounded
from tests.backends.portable.test_target import spirv_val

TRAINABLE = sorted(op.value for op in DERIVATIVES if op in ACTIVATIONS)
# random pre-activations fall outside these ones' domain: the oracle's loss is NaN as well
REAL_DOMAIN = [name for name in TRAINABLE if name not in ("log", "sqrt", "reciprocal")]


def _compile(graph, loss="l2", shared_memory=49152, deltas="samples", min_subgroup_size=32):
    plan = plan_training(graph)
    layout = ParameterLayout.of([(p.weight, p.bias, padded(p.rows), padded(p.cols)) for p in plan.layers])
    tape = TapeLayout(layout.layers, deltas)
    return tiled_step_shader(step_program(plan, made_loss(loss), tape), plan, made_loss(loss), layout, tape,
                             shared_memory, min_subgroup_size=min_subgroup_size)


@pytest.mark.parametrize("activation", TRAINABLE)
def test_every_trainable_activation_passes_spirv_val(activation, tmp_path):
    binary = _compile(mlp_graph(3, [24, 40], 5, activation=made_activation(Op(activation))))
    spirv_val(binary.spirv, tmp_path)


def test_deltas_go_to_the_tape_in_either_layout(tmp_path):
    """Sample-major (for cooperative-matrix gradients) as row-major tiles, feature-major as column-major ones."""
    graph = mlp_graph(3, [24, 40], 5, activation="relu")
    for deltas in DELTA_LAYOUTS:
        binary = _compile(graph, deltas=deltas)
        spirv_val(binary.spirv, tmp_path)
        assert binary.spirv != _compile(graph, deltas="samples" if deltas == "features" else "features").spirv


@pytest.mark.parametrize("loss", sorted(LOSS_KERNELS))
def test_every_loss_passes_spirv_val(loss, tmp_path):
    binary = _compile(mlp_graph(4, [64, 64], 3, activation="relu", encoding="frequency", octaves=3), loss)
    spirv_val(binary.spirv, tmp_path)
    assert binary.workgroup_size == (64, 2, 1)  # 64 wide: 128 invocations
    assert [b.role for b in binary.bindings][0] == "weights"


def test_models_wider_than_64_take_256_invocations_and_tiles_of_128_in_place():
    assert _compile(mlp_graph(3, [128, 64], 3, activation="relu")).workgroup_size == (128, 2, 1)
    assert _compile(mlp_graph(3, [64, 64], 3, activation="relu")).workgroup_size == (64, 2, 1)
    assert tiling_for(plan_training(mlp_graph(64, [128] * 4, 16, activation="relu"))) == Tiling(128, True, 256)


@pytest.mark.parametrize("hidden, tiling", [
    ([72, 40, 24], Tiling(128, True, 256)), ([24, 40], Tiling(64, True, 128)),
    ([144, 40], Tiling(64, False, 256)),  # nine column tiles, eight subgroups
])
def test_either_tiling_passes_spirv_val_in_either_delta_layout(hidden, tiling, tmp_path):
    graph = mlp_graph(6, hidden, 17, activation="gelu")
    assert tiling_for(plan_training(graph)) == tiling
    for deltas in DELTA_LAYOUTS:
        binary = _compile(graph, deltas=deltas)
        assert binary.workgroup_size == (tiling.samples, tiling.invocations // tiling.samples, 1)
        spirv_val(binary.spirv, tmp_path)


def _sign_words(spirv: bytes) -> set[str]:
    """The names (OpName) of the kernel's words of sign bits."""
    return {name.decode() for name in re.findall(rb"signs_\d+_\d+", spirv)}


@pytest.mark.parametrize("hidden, activation, min_subgroup_size, words", [
    ([64] * 4, "relu", 32, {f"signs_{i}_0" for i in range(4)}),  # 4 row tiles of 8 bits: a word a layer
    ([128] * 2, "relu", 32, {f"signs_{i}_{w}" for i in range(2) for w in range(2)}),  # 8 row tiles: two words
    ([24, 40], "relu", 16, {f"signs_{i}_{w}" for i in range(2) for w in range(2)}),  # 16 bits a row tile
    ([24, 40], "relu", 4, set()),  # 64 components an invocation: more than a word a row tile
    ([144, 40], "relu", 32, set()),  # two buffers: a subgroup's column tiles differ between the passes
    ([24, 40], "leaky_relu", 32, set()),
])
def test_relu_derivatives_stay_in_registers_in_place(hidden, activation, min_subgroup_size, words, tmp_path):
    """The in-place kernel keeps ReLU's derivative as bits (`tiled_signs`) for every hidden layer, laid out for the
    smallest subgroup the device may run; elsewhere it reads it back from the tape."""
    for deltas in DELTA_LAYOUTS:
        binary = _compile(mlp_graph(5, hidden, 3, activation=activation), deltas=deltas,
                          min_subgroup_size=min_subgroup_size)
        spirv_val(binary.spirv, tmp_path)
        assert _sign_words(binary.spirv) == words


def test_a_model_too_wide_for_workgroup_memory_is_refused_with_the_reason():
    graph = mlp_graph(64, [512, 512], 16, activation="relu")
    assert "workgroup memory" in unsupported_reason(plan_training(graph), get_loss("l2"), 49152)
    with pytest.raises(CompileError, match="workgroup memory"):
        _compile(graph)


def test_layouts_not_padded_to_whole_matrices_are_refused():
    graph = mlp_graph(3, [24, 40], 5, activation="relu")
    plan = plan_training(graph)
    layout = ParameterLayout.of([(p.weight, p.bias, p.rows, p.cols) for p in plan.layers])
    with pytest.raises(ValueError, match="padded to whole 16s"):
        tiled_step_shader(step_program(plan, get_loss("l2"), TapeLayout(layout.layers, "samples")), plan,
                          get_loss("l2"), layout, TapeLayout(layout.layers, "samples"))


# ----- on the GPU ----------------------------------------------------------------------------------------------------

# (inputs, hidden, outputs, activation, loss, samples): every loss the GPU trainer accepts, each with an activation
EVERY_LOSS = [(3, [64, 64], 4, "relu", "l2", 1000), (5, [32, 24], 3, "tanh", "huber", 1000),
              (3, [64, 64], 3, "relu", "relative_l2", 777), (2, [40], 3, "silu", "l1", 1000),
              (4, [16, 16], 2, "sigmoid", "bce_with_logits", 1000)]


def _session(graph, loss, step="tiled"):
    from coopnn.backends.coopvec.training import CoopvecTrainingSession

    return CoopvecTrainingSession(graph, made_loss(loss), Adam(lr=1e-3), None, step=step)


def _compare(graph, loss, inputs, outputs, samples, steps=20):
    session = _session(graph, loss)
    assert session.step_method.name == "tiled"
    assert_matches_on_random_data(session, graph, loss, inputs, outputs, samples, steps)


@pytest.mark.gpu
@pytest.mark.parametrize("inputs, hidden, outputs, activation, loss, samples", EVERY_LOSS + [
    (6, [72, 40, 24], 17, "gelu", "l2", 300), (8, [128, 128], 16, "relu", "l2", 1000),
    (5, [144, 40], 6, "tanh", "l2", 500),
    (5, [144, 40], 6, "relu", "l2", 500),  # two buffers: ReLU's derivative read back from the tape
])
def test_tiled_step_matches_the_numpy_step(coopvec_device, inputs, hidden, outputs, activation, loss, samples):
    graph = rounded(mlp_graph(inputs, hidden, outputs, activation=activation, encoding="frequency", octaves=3))
    _compare(graph, loss, inputs, outputs, samples)


@pytest.mark.gpu
@pytest.mark.parametrize("activation", REAL_DOMAIN)
def test_tiled_gradients_of_every_activation(coopvec_device, activation):
    _compare(rounded(mlp_graph(3, [24, 40], 5, activation=made_activation(Op(activation)))), "l2", 3, 5, 500, steps=0)


@pytest.mark.gpu
def test_tiled_overflowing_step_is_skipped(coopvec_device):
    graph = mlp_graph(3, [32], 3, activation="relu")
    x = np.random.default_rng(2).uniform(-1, 1, (512, 3)).astype(np.float32)
    y = np.full((512, 3), 100.0, np.float32)
    session = _session(graph, "l2")
    try:
        session.loss_scale = 2.0 ** 14
        before = session.parameters()
        session.step({"x": x}, {"y": y})
        assert session.optimizer.step_count == 0
        for name, value in session.parameters().items():
            np.testing.assert_array_equal(value, before[name])
        session.loss_scale = 1.0
        session.step({"x": x}, {"y": y})
        assert session.optimizer.step_count == 1
    finally:
        session.close()


@pytest.mark.gpu
def test_explicit_tiled_request_for_a_model_it_cannot_hold_raises(coopvec_device):
    with pytest.raises(CompileError, match="workgroup memory"):
        _session(mlp_graph(64, [1024, 1024], 16, activation="relu"), "l2")
