"""Training behind an encoding on the portable backend (lavapipe, validation layer on): the step kernel encodes the
batch (every encoding without parameters), giving the numpy oracle's gradients and its 20-step loss curve; an
encoding with parameters (a grid) is refused naming the node, as the GPU kernels do not train its tables yet."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.backends.numpy.training import NumpyTrainingSession
from coopnn.backends.portable.training import PortableTrainingSession
from coopnn.errors import CompileError
from coopnn.nets.builders import mlp_graph
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam

pytestmark = pytest.mark.vulkan

FIXED = [
    ({"otype": "Identity", "scale": 2.0, "offset": -1.0}, 2),
    ({"otype": "Frequency", "n_frequencies": 3}, 2),
    ({"otype": "Frequency", "layout": "nerf", "n_frequencies": 2}, 3),
    ({"otype": "TriangleWave", "n_frequencies": 4}, 2),
    ({"otype": "OneBlob", "n_bins": 8}, 2),
    ({"otype": "SphericalHarmonics", "degree": 4}, 3),
    ({"otype": "NRC", "n_frequencies": 2, "n_bins": 4}, 9),
]


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


@pytest.mark.parametrize("config, n_in", FIXED, ids=[c["otype"] + c.get("layout", "") for c, _ in FIXED])
def test_gradients_and_20_steps_equal_the_numpy_ones(config, n_in):
    graph = mlp_graph(n_in, [16], 3, encoding=config, seed=3)
    rng = np.random.default_rng(1)
    feeds = {"x": rng.random((77, n_in), dtype=np.float32)}
    targets = {"y": rng.random((77, 3), dtype=np.float32)}
    oracle = NumpyTrainingSession(graph, get_loss("l2"), Adam(lr=1e-2))
    device = PortableTrainingSession(graph, get_loss("l2"), Adam(lr=1e-2), None)
    try:
        expected_loss, expected = oracle.loss_and_gradients(feeds, targets)
        gradients = device.gradients(feeds, targets)
        assert device.loss(feeds, targets) == pytest.approx(expected_loss, rel=1e-4)
        for name, gradient in expected.items():
            np.testing.assert_allclose(gradients[name], gradient, rtol=1e-3, atol=1e-6, err_msg=name)
        curve = [device.step(feeds, targets) for _ in range(20)]
        np.testing.assert_allclose(curve, [oracle.step(feeds, targets) for _ in range(20)], rtol=1e-3)
        assert device.context.debug_messages == []
    finally:
        device.close()


def test_a_grid_is_refused_naming_the_node():
    with coopnn.mlp(2, [16], 3, encoding={"otype": "HashGrid", "n_levels": 2, "log2_hashmap_size": 6},
                    backend="portable") as model:
        with pytest.raises(CompileError, match=r"node 'encoding': the GPU training kernels do not train the "
                                               r"parameters of Grid\(type=Hash.*backend='numpy'"):
            coopnn.Trainer(model, backend="portable")
