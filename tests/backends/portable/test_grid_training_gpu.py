"""tiny-cuda-nn's image configuration (a 16-level hash grid of 2^15 entries a level, a 64-wide MLP) trained on a GPU by
the portable backend at a batch where many samples share every coarse table entry: the float32 atomic sums of the
tables' gradient and the 20-step loss curve against the numpy oracle's (float32 rounding only)."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.backends.numpy.training import NumpyTrainingSession
from coopnn.backends.portable.training import PortableTrainingSession
from coopnn.examples.image_models import TCNN_IMAGE_CONFIG
from coopnn.nets.builders import mlp_graph
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam

pytestmark = pytest.mark.gpu
BATCH = 1 << 14


@pytest.fixture
def gpu(validated_device):
    from coopnn.runtime.executable import chosen_device

    device = chosen_device(None)
    if device.device_type == "cpu":
        pytest.skip(f"{device.name} is a CPU device; this test is sized for a GPU")


def image_config_graph():
    network = TCNN_IMAGE_CONFIG["network"]
    hidden = [network["n_neurons"]] * network["n_hidden_layers"]
    return mlp_graph(2, hidden, 3, encoding=TCNN_IMAGE_CONFIG["encoding"], seed=7)


def check_against_the_oracle(graph, batch: int, steps: int) -> None:
    rng = np.random.default_rng(3)
    feeds = {"x": rng.random((batch, 2), dtype=np.float32)}
    targets = {"y": rng.random((batch, 3), dtype=np.float32)}
    oracle = NumpyTrainingSession(graph, get_loss("l2"), Adam(lr=1e-2))
    device = PortableTrainingSession(graph, get_loss("l2"), Adam(lr=1e-2), None)
    try:
        _, expected = oracle.loss_and_gradients(feeds, targets)
        gradients = device.gradients(feeds, targets)
        for name, gradient in expected.items():
            # summed in another order (atomics): within float32 rounding of the largest term
            np.testing.assert_allclose(gradients[name], gradient, rtol=1e-3, atol=1e-5 * np.abs(gradient).max(),
                                       err_msg=name)
        curve = [device.step(feeds, targets) for _ in range(steps)]
        np.testing.assert_allclose(curve, [oracle.step(feeds, targets) for _ in range(steps)], rtol=1e-3)
        assert curve[-1] < curve[0]
        assert device.context.debug_messages == []
    finally:
        device.close()


def test_the_image_configuration_trains_as_the_numpy_oracle(gpu):
    check_against_the_oracle(image_config_graph(), BATCH, 20)
