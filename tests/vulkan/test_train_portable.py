"""Training for a model that runs on the portable backend: the numpy backend trains, and the model on the Vulkan
device (lavapipe in CI, validation layer on) runs the new weights at once."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.runtime.numpy_backend import run_graph

pytestmark = pytest.mark.vulkan


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


def test_mlp_with_encoding_on_auto_prefers_the_device():
    with coopnn.mlp(2, [16], 3, encoding="frequency", octaves=3) as model:
        assert model.backend == "portable"
        x = np.random.default_rng(0).uniform(0, 1, (33, 2)).astype(np.float32)
        np.testing.assert_allclose(model.run(x), run_graph(model.graph, {"x": x})["y"], rtol=1e-4, atol=1e-5)


def test_portable_model_runs_weights_trained_on_numpy():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, (256, 2)).astype(np.float32)
    y = np.stack([np.sin(4 * x[:, 0]), x[:, 1], x[:, 0] * x[:, 1]], axis=1)
    with coopnn.mlp(2, [16, 16], 3, encoding="frequency", octaves=3, backend="portable") as model:
        with pytest.raises(coopnn.BackendUnavailableError, match="backends that train: numpy"):
            coopnn.Trainer(model)
        trainer = coopnn.Trainer(model, backend="numpy", optimizer=coopnn.optim.Adam(lr=1e-2))
        before = model.run(x)
        trainer.fit(x, y, steps=30, batch_size=64, progress=False)
        after = model.run(x)
        assert not np.allclose(before, after)
        np.testing.assert_allclose(after, run_graph(model.graph, {"x": x})["y"], rtol=1e-4, atol=1e-5)
        assert ((after - y) ** 2).mean() == pytest.approx(trainer.evaluate(x, y), rel=1e-3)
        assert model.device_messages == []
