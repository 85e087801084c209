"""Training on the portable target (lavapipe in CI, validation layer on): the step kernel, the tape gradient kernel
and the optimizer kernel reproduce the numpy oracle's gradients, steps and loss curves, and the model runs the
trained weights at once."""

from __future__ import annotations

import re

import numpy as np
import pytest

import coopnn
from coopnn.errors import CompileError, InputError
from coopnn.backends.numpy.inference import run_graph
from coopnn.nets.builders import mlp_graph
from coopnn.runtime.executable import MAX_DEVICE_BYTES_ENV
from coopnn.train.gpu import step_buffers
from coopnn.backends.portable.training import PortableTrainingSession
from coopnn.train.losses import get_loss
from coopnn.backends.numpy.training import NumpyTrainingSession
from coopnn.train.optim import SGD, Adam
from tests.backends.trained_in_place import run_after_steps_in_place
from tests.conftest import ROOT
from tests.devices import auto_backends

pytestmark = pytest.mark.vulkan


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


def _data(n: int, inputs: int, outputs: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, inputs)).astype(np.float32)
    y = rng.uniform(0, 1, (n, outputs)).astype(np.float32)
    return x, y


def test_mlp_with_encoding_on_auto_takes_the_fastest_backend_here():
    with coopnn.mlp(2, [16], 3, encoding="frequency", octaves=3) as model:
        assert model.backend in auto_backends()
        x = np.random.default_rng(0).uniform(0, 1, (33, 2)).astype(np.float32)
        np.testing.assert_allclose(model.run(x), run_graph(model.graph, {"x": x})["y"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("activation, output_activation, loss", [
    ("relu", None, "l2"), ("tanh", None, "l1"), ("silu", "sigmoid", "huber"), ("gelu", None, "relative_l2"),
    ("softplus", None, "bce_with_logits"), ("leaky_relu", "tanh", "l2"),
])
def test_gradients_and_one_step_equal_the_numpy_ones(activation, output_activation, loss):
    graph = mlp_graph(3, [16, 12], 4, activation=activation, output_activation=output_activation,
                      encoding="frequency", octaves=2, seed=3)
    x, y = _data(77, 3, 4)
    feeds, targets = {"x": x}, {"y": y}
    oracle = NumpyTrainingSession(graph, get_loss(loss), Adam(lr=1e-2))
    device = PortableTrainingSession(graph, get_loss(loss), Adam(lr=1e-2), None)
    try:
        expected_loss, expected = oracle.loss_and_gradients(feeds, targets)
        gradients = device.gradients(feeds, targets)
        assert device.loss(feeds, targets) == pytest.approx(expected_loss, rel=1e-5)
        for name, gradient in expected.items():
            np.testing.assert_allclose(gradients[name], gradient, rtol=1e-4, atol=1e-7, err_msg=name)
        assert device.step(feeds, targets) == pytest.approx(oracle.step(feeds, targets), rel=1e-5)
        after = device.parameters()
        for name, value in oracle.parameters().items():
            np.testing.assert_allclose(after[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
        assert device.context.debug_messages == []
    finally:
        device.close()


@pytest.mark.parametrize("optimizer", [lambda: Adam(lr=3e-3, weight_decay=1e-3),
                                       lambda: SGD(lr=0.05, momentum=0.9, nesterov=True)], ids=["adam", "sgd"])
def test_loss_curve_matches_the_numpy_backend(optimizer):
    x, y = _data(600, 2, 3, seed=4)
    curves = {}
    for backend in ("numpy", "portable"):
        with coopnn.mlp(2, [32, 32], 3, encoding="frequency", octaves=3, seed=2, backend=backend) as model:
            trainer = coopnn.Trainer(model, optimizer=optimizer(), seed=7)
            assert trainer.backend == backend
            curves[backend] = trainer.fit(x, y, steps=40, batch_size=128, progress=False)
    np.testing.assert_allclose(curves["portable"], curves["numpy"], rtol=2e-4)
    assert curves["portable"][-1] < curves["portable"][0] / 2


def test_trained_weights_run_at_once_and_evaluate_agrees():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, (256, 2)).astype(np.float32)
    y = np.stack([np.sin(4 * x[:, 0]), x[:, 1], x[:, 0] * x[:, 1]], axis=1)
    with coopnn.mlp(2, [16, 16], 3, encoding="frequency", octaves=3, backend="portable") as model:
        trainer = coopnn.Trainer(model, optimizer=coopnn.optim.Adam(lr=1e-2))
        before = model.run(x)
        executable = model._executable
        trainer.fit(x, y, steps=30, batch_size=64, progress=False)
        after = model.run(x)
        assert model._executable is executable  # new weights uploaded in place, nothing compiled again
        assert not np.allclose(before, after)
        np.testing.assert_allclose(after, run_graph(model.graph, {"x": x})["y"], rtol=1e-4, atol=1e-5)
        assert ((after - y) ** 2).mean() == pytest.approx(trainer.evaluate(x, y), rel=1e-4)
        assert model.device_messages == []
        assert trainer.session.context.debug_messages == []


# Xavier's zero biases of one width share a kernel parameter, so the model is prepared anew after the first step, in
# the session's context (which has the float atomics a trained grid asks for): the hand-off on the GPU then applies.
GRID = {"otype": "HashGrid", "n_levels": 3, "n_features_per_level": 2, "log2_hashmap_size": 6, "base_resolution": 4,
        "per_level_scale": 2.0}


@pytest.mark.parametrize("make", [lambda: coopnn.mlp(2, [16, 16], 3, backend="portable"),
                                  lambda: coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx", backend="portable"),
                                  lambda: coopnn.mlp(2, [16, 16], 3, encoding=GRID, backend="portable",
                                                    initialisation="xavier")],
                         ids=["built", "onnx", "hash-grid"])
def test_trained_weights_reach_the_model_on_the_gpu_without_a_host_round_trip(monkeypatch, make):
    with make() as model:
        rng = np.random.default_rng(2)
        x = rng.uniform(0, 1, (300, model.inputs[0].shape[1])).astype(np.float32)
        y = rng.uniform(0, 1, (300, model.outputs[0].shape[1])).astype(np.float32)
        after = run_after_steps_in_place(model, x, y, monkeypatch)
        feeds = {model.inputs[0].name: x}
        np.testing.assert_allclose(after, run_graph(model.graph, feeds)[model.outputs[0].name], rtol=1e-4, atol=1e-5)


def test_checkpoint_round_trip_continues_the_same_curve(tmp_path):
    x, y = _data(300, 2, 3, seed=5)
    with coopnn.mlp(2, [16], 3, backend="portable") as model:
        trainer = coopnn.Trainer(model, seed=3)
        trainer.fit(x, y, steps=5, batch_size=64, progress=False)
        trainer.save_checkpoint(tmp_path / "c.safetensors")
        expected = trainer.fit(x, y, steps=5, batch_size=64, progress=False)
    with coopnn.mlp(2, [16], 3, seed=99, backend="portable") as model:
        trainer = coopnn.Trainer(model)
        trainer.load_checkpoint(tmp_path / "c.safetensors")
        np.testing.assert_allclose(trainer.fit(x, y, steps=5, batch_size=64, progress=False), expected, rtol=1e-6)


# gelu_silu_mlp writes its GELUs (exact, tanh) and SiLU out in arithmetic; every one of its layers trains
@pytest.mark.parametrize("name", ["mlp_3_64x2_3", "gelu_silu_mlp", "gelu_silu_opset20"])
def test_zoo_mlp_trains_every_layer_on_the_device_like_numpy(name):
    model = coopnn.load(ROOT / "models" / f"{name}.onnx", backend="numpy")
    x, y = _data(200, model.inputs[0].shape[1], model.outputs[0].shape[1], seed=6)
    feeds, targets = {model.inputs[0].name: x}, {model.outputs[0].name: y}
    oracle = NumpyTrainingSession(model.graph, get_loss("l2"), Adam(lr=1e-2))
    device = PortableTrainingSession(model.graph, get_loss("l2"), Adam(lr=1e-2), None)
    try:
        _, expected = oracle.loss_and_gradients(feeds, targets)
        gradients = device.gradients(feeds, targets)
        assert sorted(gradients) == sorted(expected) == sorted(model.parameters())
        for name, gradient in expected.items():
            np.testing.assert_allclose(gradients[name], gradient, rtol=1e-4, atol=1e-7, err_msg=name)
        assert device.step(feeds, targets) == pytest.approx(oracle.step(feeds, targets), rel=1e-5)
        after = device.parameters()
        for name, value in oracle.parameters().items():
            np.testing.assert_allclose(after[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    finally:
        device.close()


def test_graph_outside_the_kernels_reach_names_the_node_and_the_numpy_way():
    model = coopnn.load(ROOT / "models" / "nerf_skip_two_heads.onnx", backend="numpy")
    with pytest.raises(CompileError, match="outputs.*backend='numpy'"):
        coopnn.Trainer(model, backend="portable")


def test_a_batch_beyond_the_tape_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(step_buffers, "MAX_TAPE_BYTES", 64 * 1024)
    with coopnn.mlp(2, [16], 3, backend="portable") as model:
        trainer = coopnn.Trainer(model)
        x, y = _data(4096, 2, 3)
        with pytest.raises(InputError, match="at most .* samples.*the tape's bound.*batch_size"):
            trainer.step(x, y)
        trainer.step(x[:100], y[:100])


def test_a_batch_beyond_max_device_bytes_is_refused_naming_the_largest_that_fits(monkeypatch):
    limit = 200_000
    monkeypatch.setenv(MAX_DEVICE_BYTES_ENV, str(limit))
    with coopnn.mlp(2, [16], 3, backend="portable") as model:
        trainer = coopnn.Trainer(model)
        x, y = _data(4096, 2, 3)
        with pytest.raises(InputError, match=f"does not fit.*{MAX_DEVICE_BYTES_ENV}={limit}") as refused:
            trainer.step(x, y)
        most = int(re.search(r"at most (\d+) samples", str(refused.value)).group(1))
        assert f"batch_size={most} or less" in str(refused.value) and 100 < most < 4096
        trainer.step(x[:most], y[:most])
        session = trainer.session
        # the buffers made per capacity count too: the loss tiles' sums and the chunks' partial gradients
        assert sum(b.size for b in [*session.io.values(), session.loss_sums, session.partials]) <= limit
        with pytest.raises(InputError, match=f"at most {most} samples"):
            trainer.step(x[:most + 1], y[:most + 1])
        with pytest.raises(InputError, match=f"at most {most} samples"):
            trainer.fit(x, y, steps=2, batch_size=most + 1, progress=False)
        assert np.isfinite(trainer.fit(x, y, steps=2, batch_size=most, progress=False)).all()
