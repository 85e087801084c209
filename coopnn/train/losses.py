"""Training losses by name: each gives the batch loss and its gradient with respect to the prediction.

Every loss is the mean of a per-element term over all elements of the batch (samples times output features), so
its gradient is the per-element derivative divided by that count. Values are accumulated in float64 and returned as
Python floats; gradients keep the prediction's dtype (float32 in training, float64 in the gradient checks).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Callable, Mapping

import numpy as np

from coopnn.errors import InputError


@dataclass(frozen=True)
class Loss(ABC):
    """A loss: `terms(prediction, target)` gives the per-element values and their derivatives in the prediction."""

    name = ""
    # whether a GPU step kernel also writes the gradient in the first layer's input (`step_program`)
    writes_input_gradient = False

    @abstractmethod
    def terms(self, prediction: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-element loss values and their derivatives in `prediction`."""

    def options(self) -> dict:
        """The loss's settings (what a checkpoint records and a GPU training kernel reads)."""
        return asdict(self)

    def value_and_gradient(self, prediction: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray]:
        """The mean loss over every element and its gradient with respect to `prediction`."""
        values, derivatives = self.terms(prediction, target)
        count = max(prediction.size, 1)
        return float(np.sum(values, dtype=np.float64) / count), derivatives / prediction.dtype.type(count)

    def value(self, prediction: np.ndarray, target: np.ndarray) -> float:
        return self.value_and_gradient(prediction, target)[0]


@dataclass(frozen=True)
class L2(Loss):
    """Squared error (p - t)^2."""

    name = "l2"

    def terms(self, prediction, target):
        difference = prediction - target
        return difference * difference, 2 * difference


@dataclass(frozen=True)
class L1(Loss):
    """Absolute error |p - t|; its gradient at p = t is 0."""

    name = "l1"

    def terms(self, prediction, target):
        difference = prediction - target
        return np.abs(difference), np.sign(difference)


@dataclass(frozen=True)
class RelativeL2(Loss):
    """(p - t)^2 / (p^2 + epsilon), the relative L2 of Noise2Noise used to train radiance caches (Müller et al. 2021).

    As there, the denominator is treated as a constant when differentiating: the gradient is 2 (p - t) / (p^2 +
    epsilon), so bright and dark samples pull alike while the prediction is never pushed up just to shrink the loss.
    """

    epsilon: float = 0.01
    name = "relative_l2"

    def terms(self, prediction, target):
        difference = prediction - target
        scale = 1 / (prediction * prediction + self.epsilon)
        return difference * difference * scale, 2 * difference * scale


@dataclass(frozen=True)
class Huber(Loss):
    """0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta), with d = p - t (PyTorch's HuberLoss)."""

    delta: float = 1.0
    name = "huber"

    def terms(self, prediction, target):
        difference = prediction - target
        magnitude = np.abs(difference)
        inside = magnitude <= self.delta
        values = np.where(inside, 0.5 * difference * difference, self.delta * (magnitude - 0.5 * self.delta))
        return values, np.clip(difference, -self.delta, self.delta)


@dataclass(frozen=True)
class BCEWithLogits(Loss):
    """Binary cross-entropy of sigmoid(p) against targets t in [0, 1], computed from the logits p without overflow."""

    name = "bce_with_logits"

    def terms(self, prediction, target):
        values = np.maximum(prediction, 0) - prediction * target + np.log1p(np.exp(-np.abs(prediction)))
        sigmoid = 0.5 + 0.5 * np.tanh(0.5 * prediction)  # the logistic function, overflow-free in any float dtype
        return values, sigmoid - target


@dataclass(frozen=True)
class UpstreamGradient(Loss):
    """The loss whose derivative in the prediction is its target, p t: trained with the gradient of some other loss
    in the prediction as the target, a step's backward pass gives that loss's gradients (`coopnn.torch`'s backward,
    which also reads the gradient in the network's input that GPU step kernels then write)."""

    name = "upstream_gradient"
    writes_input_gradient = True

    def terms(self, prediction, target):
        return prediction * target, target.astype(prediction.dtype, copy=True)


@dataclass(frozen=True)
class TensorLanguageLoss(Loss):
    """A per-element term written in the tensor language (`coopnn.tl.loss`): the function `function` of `text` of
    (prediction, target), run by the tl interpreter here and fused into GPU step kernels; its derivative in the
    prediction is the text's function `derivative` where named, else derived from the body."""

    text: str = ""
    function: str | None = None
    derivative: str | None = None
    name = "tl"

    def __post_init__(self) -> None:
        from coopnn.tl.functions import named

        named.loss_function(self.text, self.function)
        if self.derivative is not None:  # a missing or misfit derivative fails here, as an activation's does
            named.derivative_function(self.text, self.function, named.name_of(self.derivative, "derivative"),
                                      2, 0, "loss")

    def terms(self, prediction, target):
        from coopnn.tl.functions import evaluate, named

        forward = named.loss_function(self.text, self.function)
        slope = named.derivative_function(self.text, self.function, self.derivative, 2, 0, "loss")
        values = evaluate.evaluate(forward, prediction, target)[0]
        return values.astype(prediction.dtype), evaluate.evaluate(slope, prediction, target)[0].astype(prediction.dtype)


LOSSES: Mapping[str, Callable[..., Loss]] = {cls.name: cls for cls in (L2, L1, RelativeL2, Huber, BCEWithLogits,
                                                                       UpstreamGradient, TensorLanguageLoss)}


def get_loss(loss: str | Loss, **options) -> Loss:
    """The loss registered as `loss` made with `options` (a Loss is returned as it is)."""
    if isinstance(loss, Loss):
        return loss
    try:
        factory = LOSSES[loss]
    except (KeyError, TypeError):
        raise InputError(f"unknown loss {loss!r}; losses: {', '.join(LOSSES)}") from None
    try:
        return factory(**options)
    except TypeError as e:
        raise InputError(f"loss {loss!r}: {e}") from None
