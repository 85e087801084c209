"""Losses: values on known cases and gradients against central differences in float64; the registry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coopnn.errors import InputError
from coopnn.train.losses import LOSSES, BCEWithLogits, Huber, Loss, RelativeL2, get_loss
from tests.tl.functions.examples import made_loss
from tests.train.conftest import STEP

rng = np.random.default_rng(3)
PREDICTION = rng.uniform(-2, 2, (6, 3))
TARGET = rng.uniform(0, 1, (6, 3))


def _central_differences(value, p: np.ndarray) -> np.ndarray:
    grad = np.empty_like(p)
    for i in np.ndindex(p.shape):
        up, down = p.copy(), p.copy()
        up[i] += STEP
        down[i] -= STEP
        grad[i] = (value(up) - value(down)) / (2 * STEP)
    return grad


# relative_l2's gradient is not its value's (below); a tensor-language loss computes in its function's f32, which
# central differences in float64 do not resolve (tests/tl/functions/test_uses.py checks it against numpy)
@pytest.mark.parametrize("name", [n for n in LOSSES if n not in ("relative_l2", "tl")])
def test_gradient_matches_central_differences(name):
    loss = get_loss(name)
    value, grad = loss.value_and_gradient(PREDICTION, TARGET)
    assert isinstance(value, float) and grad.dtype == np.float64 and grad.shape == PREDICTION.shape
    numeric = _central_differences(lambda p: loss.value(p, TARGET), PREDICTION)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_relative_l2_gradient_treats_the_denominator_as_constant():
    loss = RelativeL2()
    _, grad = loss.value_and_gradient(PREDICTION, TARGET)
    frozen = PREDICTION**2 + loss.epsilon
    numeric = _central_differences(lambda p: np.mean((p - TARGET) ** 2 / frozen), PREDICTION)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_known_values():
    p, t = np.array([[1.0, -1.0, 3.0]]), np.array([[0.0, 1.0, 0.5]])
    assert get_loss("l2").value(p, t) == pytest.approx((1 + 4 + 6.25) / 3)
    assert get_loss("l1").value(p, t) == pytest.approx((1 + 2 + 2.5) / 3)
    assert get_loss("huber").value(p, t) == pytest.approx((0.5 + 1.5 + 2.0) / 3)
    assert Huber(delta=2.0).value(p, t) == pytest.approx((0.5 + 2.0 + 3.0) / 3)
    assert get_loss("relative_l2").value(p, t) == pytest.approx((1 / 1.01 + 4 / 1.01 + 6.25 / 9.01) / 3)
    logits, labels = np.array([[0.0, 2.0]]), np.array([[1.0, 0.0]])
    assert BCEWithLogits().value(logits, labels) == pytest.approx((math.log(2) + math.log1p(math.exp(2))) / 2)


def test_bce_with_logits_does_not_overflow():
    value, grad = BCEWithLogits().value_and_gradient(np.array([[1e4, -1e4]], np.float32), np.array([[1.0, 1.0]]))
    assert value == pytest.approx(1e4 / 2) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, [[0, -0.5]])


def test_float32_predictions_give_float32_gradients():
    for name in LOSSES:
        _, grad = made_loss(name).value_and_gradient(PREDICTION.astype(np.float32), TARGET.astype(np.float32))
        assert grad.dtype == np.float32, name


def test_registry_and_options():
    assert set(LOSSES) == {"l2", "l1", "relative_l2", "huber", "bce_with_logits", "upstream_gradient", "tl"}
    assert get_loss("huber", delta=0.5).options() == {"delta": 0.5}
    assert get_loss("l2").options() == {}
    custom = Huber(delta=0.1)
    assert get_loss(custom) is custom and isinstance(custom, Loss)
    with pytest.raises(InputError, match="unknown loss 'mse'; losses: l2, l1, relative_l2, huber, bce_with_logits, "
                                         "upstream_gradient, tl"):
        get_loss("mse")
    with pytest.raises(InputError, match="loss 'l2'"):
        get_loss("l2", delta=1.0)
