"""The push constants of the optimizer shader (`coopnn.shaders.training.optimizer`) for one update of a
`coopnn.train.optim` optimizer: its hyperparameters and the per-step values numpy computes in float64."""

from __future__ import annotations

import math

from coopnn.shaders.targets.base import Binary
from coopnn.train.optim import SGD, Adam, Optimizer


def optimizer_push(shader: Binary, optimizer: Optimizer, step: int, count: int,
                   gradient_scale: float) -> bytes:
    """The push constants of `shader` for update number `step` (1-based) of `optimizer` over `count` elements, the
    gradient multiplied by `gradient_scale` first."""
    if step < 1:
        raise ValueError(f"optimizer steps count from 1, got {step}")
    common = {"count": count, "gradient_scale": gradient_scale, "weight_decay": optimizer.weight_decay}
    if isinstance(optimizer, Adam):
        beta1, beta2 = optimizer.betas
        return shader.pack_push(**common, one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2,
                                step_size=optimizer.lr / (1 - beta1**step),
                                bias_correction2_sqrt=math.sqrt(1 - beta2**step), eps=optimizer.eps)
    if isinstance(optimizer, SGD):
        # numpy seeds the momentum buffer with the gradient on the first update, as torch does.
        return shader.pack_push(**common, lr=optimizer.lr, momentum=optimizer.momentum,
                                one_minus_dampening=1 - optimizer.dampening, nesterov=optimizer.nesterov,
                                first=step == 1)
    raise ValueError(f"no optimizer shader for {type(optimizer).__name__}")
