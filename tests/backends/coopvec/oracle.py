"""The comparison every coopvec training-kernel test makes with the numpy oracle: the batch loss, every parameter's
gradient and a loss curve, within the tolerances float16 products allow; and the random float16-rounded models and
batches the tiled kernels' tests compare on."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.graph.parameters import parameters, with_parameters
from coopnn.layouts.formats.fp16 import round_fp16

GRADIENT_TOLERANCE = 0.025  # of each parameter's largest gradient
CURVE_TOLERANCE = 2e-3  # relative, per step (measured: at most 4.8e-4 over 20 steps)


def assert_matches_the_oracle(session, oracle, feeds, targets, steps: int = 20) -> None:
    """`session`'s loss, gradients and `steps` steps agree with `oracle` (a NumpyTrainingSession) on one batch."""
    expected_loss, expected = oracle.loss_and_gradients(feeds, targets)
    assert session.loss(feeds, targets) == pytest.approx(expected_loss, rel=1e-3)
    got = session.gradients(feeds, targets)
    for name, gradient in expected.items():
        np.testing.assert_allclose(got[name], gradient, rtol=0, atol=GRADIENT_TOLERANCE * np.abs(gradient).max(),
                                   err_msg=name)
    curve = [session.step(feeds, targets) for _ in range(steps)]
    reference = [oracle.step(feeds, targets) for _ in range(steps)]
    np.testing.assert_allclose(curve, reference, rtol=CURVE_TOLERANCE)


def rounded(graph):
    """`graph` with float16-rounded parameters."""
    return with_parameters(graph, {k: round_fp16(v) for k, v in parameters(graph).items()})


def assert_matches_on_random_data(session, graph, loss, inputs: int, outputs: int, samples: int,
                                  steps: int = 20, low: float = -1.0) -> None:
    """`session` (closed after) against the numpy oracle of `graph` with `loss` (a name) on a random float16-rounded
    batch of `samples` uniform in [`low`, 1), as `assert_matches_the_oracle`."""
    from coopnn.backends.numpy.training import NumpyTrainingSession
    from coopnn.train.losses import get_loss
    from coopnn.train.optim import Adam

    rng = np.random.default_rng(1)
    x = round_fp16(rng.uniform(low, 1, (samples, inputs)).astype(np.float32))
    y = round_fp16(rng.uniform(0, 1, (samples, outputs)).astype(np.float32))
    oracle = NumpyTrainingSession(graph, get_loss(loss), Adam(lr=1e-3))
    try:
        assert_matches_the_oracle(session, oracle, {"x": x}, {"y": y}, steps)
    finally:
        session.close()
