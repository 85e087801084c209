"""The comparison every coopvec training-kernel test makes with the numpy oracle: the batch loss, every parameter's
gradient and a loss curve, within the tolerances float16 products allow."""

from __future__ import annotations

import numpy as np
import pytest

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
