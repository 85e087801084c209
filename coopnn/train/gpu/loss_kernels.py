"""Training losses written as kernel instructions: per output component, the loss term and its derivative in the
prediction, the seed of a training kernel's backward pass.

Each rule computes the formula of `Loss.terms` in `coopnn.train.losses` in the same order and with the same
overflow-free forms. Like `Loss.terms` they are per-element terms: the division by the element count that makes the
mean is the caller's, since only the caller knows the batch.
"""

from __future__ import annotations

from typing import Callable

from coopnn.errors import CompileError
from coopnn.registry import registrar
from coopnn.shaders.kernel.builder import KernelBuilder
from coopnn.shaders.kernel.derivatives import logistic
from coopnn.train.losses import Loss

LossKernel = Callable[..., tuple[str, str]]  # (k, prediction, target, **options) -> (value, derivative)
LOSS_KERNELS: dict[str, LossKernel] = {}


_loss_kernel = registrar(LOSS_KERNELS)  # @_loss_kernel("name")


def loss_terms(k: KernelBuilder, loss: Loss, prediction: str, target: str) -> tuple[str, str]:
    """The kernel values of `loss`'s per-component term and its derivative in `prediction`, given `target`."""
    if loss.name not in LOSS_KERNELS:
        raise CompileError(f"GPU training has no kernel for the loss {loss.name!r}; supported: "
                           f"{', '.join(LOSS_KERNELS)}")
    return LOSS_KERNELS[loss.name](k, prediction, target, **loss.options())


@_loss_kernel("l2")
def l2(k, prediction, target):
    difference = k.binary("sub", prediction, target)
    return k.binary("mul", difference, difference), k.scalar("mul", difference, 2.0)


@_loss_kernel("l1")
def l1(k, prediction, target):
    difference = k.binary("sub", prediction, target)
    return k.unary("abs", difference), k.unary("sign", difference)  # sign(0) = 0: no pull where p = t


@_loss_kernel("relative_l2")
def relative_l2(k, prediction, target, epsilon):
    difference = k.binary("sub", prediction, target)
    scale = k.scalar("div", k.scalar("add", k.binary("mul", prediction, prediction), epsilon), 1.0, left=True)
    value = k.binary("mul", k.binary("mul", difference, difference), scale)
    return value, k.binary("mul", k.scalar("mul", difference, 2.0), scale)


@_loss_kernel("huber")
def huber(k, prediction, target, delta):
    difference = k.binary("sub", prediction, target)
    magnitude = k.unary("abs", difference)
    inside = k.compare("cmp.le", magnitude, k.splat(delta, k.type_of(magnitude).size))
    quadratic = k.binary("mul", k.scalar("mul", difference, 0.5), difference)
    linear = k.scalar("mul", k.scalar("sub", magnitude, 0.5 * delta), delta)
    return k.select(inside, quadratic, linear), k.scalar("min", k.scalar("max", difference, -delta), delta)


@_loss_kernel("bce_with_logits")
def bce_with_logits(k, prediction, target):
    # max(p, 0) - p t + log(1 + exp(-|p|)): exp never overflows, whatever the sign of p
    tail = k.unary("log", k.scalar("add", k.unary("exp", k.unary("neg", k.unary("abs", prediction))), 1.0))
    value = k.binary("add", k.binary("sub", k.scalar("max", prediction, 0.0), k.binary("mul", prediction, target)),
                     tail)
    return value, k.binary("sub", logistic(k, prediction), target)


@_loss_kernel("tl")
def tensor_language(k, prediction, target, text, function, derivative):
    from coopnn.tl.functions import uses  # coopnn.tl reads the kernel level: imported when used

    forward = uses.loss_function(text, function)
    slope = uses.derivative_function(text, function, derivative, 2, 0, "loss")
    return k.function(forward, prediction, target)[0], k.function(slope, prediction, target)[0]


@_loss_kernel("upstream_gradient")
def upstream_gradient(k, prediction, target):
    return k.binary("mul", prediction, target), target
