"""The numpy trainer differentiates through the encodings: a model's loss gradient in its grid tables and layers
agrees with finite differences, Adam and SGD move the tables, and the tables are ordinary named parameters in
parameter files, `parameters_file=` and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.backends.numpy.backend import NumpyBackend
from coopnn.nets.builders import mlp_graph
from coopnn.train.losses import get_loss
from coopnn.train.optim import SGD, Adam

GRID = {"otype": "HashGrid", "n_levels": 3, "n_features_per_level": 2, "log2_hashmap_size": 6, "base_resolution": 4,
        "per_level_scale": 2.0}
COMPOSITE = {"otype": "Composite", "nested": [
    {"otype": "DenseGrid", "n_dims_to_encode": 2, "n_levels": 2, "base_resolution": 3, "per_level_scale": 2.0,
     "interpolation": "Smoothstep"},
    {"otype": "OneBlob", "n_bins": 4}]}
rng = np.random.default_rng(6)
FEEDS = {"x": rng.uniform(0.05, 0.95, (16, 3)).astype(np.float32)}
TARGETS = {"y": rng.uniform(-1, 1, (16, 2)).astype(np.float32)}


def session_for(encoding, optimizer=None):
    graph = mlp_graph(3, [8], 2, activation="tanh", encoding=encoding, seed=1)
    params = {name: value for name, value in graph.constants.items() if name == "encoding.params"}
    scaled = graph.replace(constants={**graph.constants, **{k: v * 1000 for k, v in params.items()}})
    return NumpyBackend().prepare_training(scaled, get_loss("l2"), optimizer or SGD(lr=0.1), device=None)


@pytest.mark.parametrize("encoding", [GRID, COMPOSITE], ids=["hashgrid", "composite"])
def test_loss_gradients_agree_with_finite_differences(encoding):
    session = session_for(encoding)
    loss, gradients = session.loss_and_gradients(FEEDS, TARGETS)
    assert set(gradients) == set(session.parameters()) and "encoding.params" in gradients
    for name in ("encoding.params", "layers.0.weight"):
        values = session.parameters()
        flat = values[name].ravel()
        touched = np.flatnonzero(gradients[name].ravel())[:12]
        assert len(touched) > 0
        for index in touched:
            step = 1e-2 * max(1.0, abs(float(flat[index])))
            shifted = []
            for sign in (1, -1):
                changed = flat.copy()
                changed[index] += sign * step
                session.load_parameters({name: changed.reshape(values[name].shape)})
                shifted.append(session.loss(FEEDS, TARGETS))
            session.load_parameters({name: values[name]})
            numeric = (shifted[0] - shifted[1]) / (2 * step)
            assert gradients[name].ravel()[index] == pytest.approx(numeric, rel=2e-2, abs=1e-6)


@pytest.mark.parametrize("optimizer", [SGD(lr=0.5), Adam(lr=1e-2, eps=1e-15)], ids=["sgd", "adam"])
def test_optimizers_move_the_grid_tables(optimizer):
    session = session_for(GRID, optimizer)
    before = session.parameters()["encoding.params"]
    losses = [session.step(FEEDS, TARGETS) for _ in range(30)]
    after = session.parameters()["encoding.params"]
    assert not np.array_equal(before, after) and losses[-1] < losses[0]


def test_grid_tables_are_named_parameters_in_files_and_checkpoints(tmp_path):
    model = coopnn.mlp(2, [16], 3, encoding=GRID, backend="numpy", seed=3)
    assert model.parameters()["encoding.params"].shape == (model.graph.constants["encoding.params"].size,)
    trainer = coopnn.Trainer(model, "l2", Adam(lr=1e-2), seed=0)
    x = rng.random((64, 2), dtype=np.float32)
    y = rng.random((64, 3), dtype=np.float32)
    trainer.fit(x, y, steps=5, batch_size=32, progress=False)
    trainer.save_checkpoint(tmp_path / "ckpt.safetensors")
    model.save_parameters(tmp_path / "weights.safetensors")
    trained = model.parameters()["encoding.params"].copy()
    trainer.fit(x, y, steps=5, batch_size=32, progress=False)
    trainer.load_checkpoint(tmp_path / "ckpt.safetensors")
    np.testing.assert_array_equal(model.parameters()["encoding.params"], trained)
    fresh = coopnn.mlp(2, [16], 3, encoding=GRID, backend="numpy", seed=9)
    onnx_path = tmp_path / "m.onnx"
    fresh.save(onnx_path)
    loaded = coopnn.load(onnx_path, backend="numpy", parameters_file=tmp_path / "weights.safetensors")
    np.testing.assert_array_equal(loaded.parameters()["encoding.params"], trained)
    np.testing.assert_allclose(loaded.run(x), model.run(x), rtol=1e-5, atol=1e-6)
