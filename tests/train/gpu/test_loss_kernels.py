"""The loss kernels, run by the kernel interpreter, against `Loss.terms` in float32."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from coopnn.errors import CompileError
from coopnn.shaders.kernel.builder import KernelBuilder
from coopnn.shaders.kernel.interpret import run_program
from coopnn.shaders.kernel.program import VecType
from coopnn.train.gpu.loss_kernels import LOSS_KERNELS, loss_terms
from coopnn.train.losses import LOSSES, Loss, get_loss
from tests.tl.functions.examples import LOG_COSH, SOFTPLUS_LOSS

# predictions: 0, tiny and large magnitudes of both signs and the huber kinks (|p - t| = delta for t = 0)
_MAGNITUDES = [1e-7, 1e-3, 0.25, 0.5, 1.0, 3.0, 20.0, 80.0]
PREDICTIONS = np.array([0.0] + _MAGNITUDES + [-m for m in _MAGNITUDES], np.float32)
TARGETS = np.array([0.0, 0.5, 1.0, -3.0, 20.0], np.float32)
PROBABILITIES = np.array([0.0, 0.25, 0.5, 1.0], np.float32)  # bce_with_logits targets are in [0, 1]
FEATURES = 2  # two components per sample, so a constant of the wrong size cannot hide behind broadcasting

CASES = [
    ("l2", {}), ("l1", {}), ("relative_l2", {}), ("relative_l2", {"epsilon": 1e-4}), ("huber", {}),
    ("huber", {"delta": 0.5}), ("bce_with_logits", {}), ("upstream_gradient", {}), ("tl", {"text": LOG_COSH}),
    ("tl", {"text": SOFTPLUS_LOSS, "derivative": "logistic_difference"}),
]


def _case_id(name: str, options: dict) -> str:
    shown = {k: v for k, v in options.items() if k != "text"}  # a function's text is too long for a test id
    return f"{name}{shown or ''}"


def _kernel_terms(loss: Loss, prediction: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, derivatives) from a kernel program that loads the prediction and the target and stores both."""
    k = KernelBuilder("loss")
    loaded = []
    for name in ("prediction", "target"):
        k.add_param(name, "input", (FEATURES,), name)
        loaded.append(k.emit("load", VecType("f32", FEATURES), (name,)))
    for name, value in zip(("value", "derivative"), loss_terms(k, loss, *loaded)):
        k.emit("store", None, (value, k.add_param(name, "output", (FEATURES,), name).name))
    outputs = run_program(k.build(), {"prediction": prediction, "target": target})
    return outputs["value"], outputs["derivative"]


def test_every_loss_has_a_kernel_and_is_checked():
    assert set(LOSS_KERNELS) == set(LOSSES)
    assert {name for name, _ in CASES} == set(LOSSES)


@pytest.mark.parametrize("name, options", CASES, ids=[_case_id(name, options) for name, options in CASES])
def test_loss_kernel_matches_the_loss_terms(name, options):
    loss = get_loss(name, **options)
    targets = PROBABILITIES if name == "bce_with_logits" else TARGETS
    p, t = (a.reshape(-1) for a in np.meshgrid(PREDICTIONS, targets))
    prediction, target = np.stack([p, p[::-1]], axis=1), np.stack([t, t[::-1]], axis=1)
    want_values, want_derivatives = loss.terms(prediction, target)
    values, derivatives = _kernel_terms(loss, prediction, target)
    assert values.dtype == derivatives.dtype == np.float32
    # bce's log(1 + exp(-|p|)) loses what numpy's log1p keeps of a tail below float32's epsilon, inside atol
    np.testing.assert_allclose(values, want_values, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(derivatives, want_derivatives, rtol=1e-5, atol=1e-6)


def test_gradients_at_the_kinks():
    zero = np.zeros((1, FEATURES), np.float32)
    assert _kernel_terms(get_loss("l1"), zero, zero)[1][0, 0] == 0
    at_delta = np.array([[-0.5, 0.5]], np.float32)
    values, derivatives = _kernel_terms(get_loss("huber", delta=0.5), at_delta, np.zeros_like(at_delta))
    np.testing.assert_array_equal(values, [[0.125, 0.125]])
    np.testing.assert_array_equal(derivatives, [[-0.5, 0.5]])


def test_an_unknown_loss_is_a_compile_error_naming_the_supported_ones():
    @dataclass(frozen=True)
    class Cubic(Loss):
        name = "cubic"

        def terms(self, prediction, target):
            return (prediction - target) ** 3, 3 * (prediction - target) ** 2

    k = KernelBuilder("loss")
    k.add_param("p", "input", (FEATURES,), "p")
    p = k.emit("load", VecType("f32", FEATURES), ("p",))
    with pytest.raises(CompileError, match="'cubic'.*l2, l1, relative_l2, huber, bce_with_logits"):
        loss_terms(k, Cubic(), p, p)
