"""The values the optimizer shader (`coopnn.shaders.training.optimizer`) takes for a `coopnn.train.optim` optimizer:
its hyperparameters as push constants, and per update the values numpy computes in float64 as schedule rows."""

from __future__ import annotations

import numpy as np

from coopnn.shaders.targets.base import Binary
from coopnn.shaders.training.optimizer import SCHEDULE_ROWS, SCHEDULE_WORDS
from coopnn.train.optim import SGD, Adam, Optimizer


def optimizer_push(shader: Binary, optimizer: Optimizer, count: int, gradient_scale: float, **step) -> bytes:
    """The push constants of `shader` for `optimizer` over `count` elements, the gradient multiplied by
    `gradient_scale` (and divided by the loss scale) first; `step`: the rest (the loss sums' `terms`, the `chunks`
    of partial gradients)."""
    common = {"count": count, "gradient_scale": gradient_scale, "weight_decay": optimizer.weight_decay, **step}
    if isinstance(optimizer, Adam):
        beta1, beta2 = optimizer.betas
        return shader.pack_push(**common, one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2,
                                eps=optimizer.eps)
    if isinstance(optimizer, SGD):
        return shader.pack_push(**common, lr=optimizer.lr, momentum=optimizer.momentum,
                                one_minus_dampening=1 - optimizer.dampening, nesterov=optimizer.nesterov)
    raise ValueError(f"no optimizer shader for {type(optimizer).__name__}")


def schedule_rows(optimizer: Optimizer, first_step: int, updates: int) -> np.ndarray:
    """The schedule rows (float32, `updates` rows of `SCHEDULE_WORDS`) of updates `first_step` + 1 .. `first_step` +
    `updates`, in that order; update t goes to row (t - 1) mod `SCHEDULE_ROWS` of the shader's ring."""
    # numpy over the steps at once: a loop in Python cost the host a noticeable share of a short run
    steps = np.arange(first_step + 1, first_step + updates + 1, dtype=np.float64)
    rows = np.zeros((updates, SCHEDULE_WORDS), np.float64)
    if isinstance(optimizer, Adam):
        beta1, beta2 = optimizer.betas
        rows[:, 0] = optimizer.lr / (1 - np.power(beta1, steps))
        rows[:, 1] = np.sqrt(1 - np.power(beta2, steps))
    elif isinstance(optimizer, SGD):
        rows[:, 0] = steps == 1
    else:
        raise ValueError(f"no optimizer shader for {type(optimizer).__name__}")
    return rows.astype(np.float32)
