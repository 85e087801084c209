"""Derivatives of the elementwise unary operators for reverse mode: dy/dx from the input x and the output y.

Each rule follows the forward semantics of `coopnn.graph.ops`: its branches, and its attribute defaults, read from
the forward function's signature so they cannot drift apart. At a kink the derivative is that of the branch the
forward takes there (relu'(0) = 0, |x|'(0) = 0). Rules compute in x's dtype, so one table serves float32 training
and float64 gradient checks. Floor, ceil and sign are constant almost everywhere, so no gradient could train
through them: they have no rule, and training through them is a compile error.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from coopnn.graph import ops
from coopnn.graph.ir import Op
from coopnn.graph.ops import forward_defaults

_GELU_TANH_COEFFICIENT = 0.044715  # of tanh(sqrt(2 / pi) (x + c x^3)), the tanh form of GELU


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 + 0.5 * np.tanh(0.5 * x)  # the logistic function, overflow-free in any float dtype


def _gelu(x, y, approximate):
    if approximate == "tanh":
        scale = math.sqrt(2 / math.pi)
        t = np.tanh(scale * (x + _GELU_TANH_COEFFICIENT * x**3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * scale * (1 + 3 * _GELU_TANH_COEFFICIENT * x * x)
    cdf = 0.5 * (1 + ops.evaluate(Op.ERF, [x / math.sqrt(2)], {}))
    return cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _softplus(x, y, beta, threshold):
    slope = _sigmoid(beta * x)
    return slope if threshold is None else np.where(beta * x > threshold, 1, slope)


def _mish(x, y):
    t = np.tanh(np.logaddexp(0, x))
    return t + x * (1 - t * t) * _sigmoid(x)


def _clip(x, y, min, max):
    inside = np.ones(x.shape, bool)
    if min is not None:
        inside &= x >= min
    if max is not None:
        inside &= x <= max
    return inside


# op -> dy/dx as a function of (x, y, **attributes)
_RULES: dict[Op, Callable[..., Any]] = {
    Op.RELU: lambda x, y: x > 0,
    Op.LEAKY_RELU: lambda x, y, alpha: np.where(x >= 0, 1, alpha),
    Op.ELU: lambda x, y, alpha: np.where(x > 0, 1, y + alpha),
    Op.SELU: lambda x, y, alpha, gamma: gamma * np.where(x > 0, 1, alpha * np.exp(np.minimum(x, 0))),
    Op.CELU: lambda x, y, alpha: np.where(x > 0, 1, np.exp(np.minimum(x, 0) / alpha)),
    Op.SIGMOID: lambda x, y: y * (1 - y),
    Op.HARD_SIGMOID: lambda x, y, alpha, beta: np.where((alpha * x + beta > 0) & (alpha * x + beta < 1), alpha, 0),
    Op.HARD_SWISH: lambda x, y: np.where(x < -3, 0, np.where(x > 3, 1, x / 3 + 0.5)),
    Op.TANH: lambda x, y: 1 - y * y,
    Op.SOFTPLUS: _softplus,
    Op.SOFTSIGN: lambda x, y: 1 / np.square(1 + np.abs(x)),
    Op.GELU: _gelu,
    Op.SILU: lambda x, y: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))),
    Op.MISH: _mish,
    Op.CLIP: _clip,
    Op.EXP: lambda x, y: y,
    Op.LOG: lambda x, y: 1 / x,
    Op.SIN: lambda x, y: np.cos(x),
    Op.COS: lambda x, y: -np.sin(x),
    Op.NEG: lambda x, y: np.full_like(x, -1),
    Op.ABS: lambda x, y: np.sign(x),
    Op.SQRT: lambda x, y: 0.5 / y,
    Op.RECIPROCAL: lambda x, y: -y * y,
    Op.ERF: lambda x, y: 2 / math.sqrt(math.pi) * np.exp(-x * x),
    Op.IDENTITY: lambda x, y: np.ones_like(x),
}


_DEFAULTS: dict[Op, dict[str, Any]] = {op: forward_defaults(op) for op in _RULES}

DIFFERENTIABLE_UNARY: frozenset[Op] = frozenset(_RULES)


def derivative(op: Op, x: np.ndarray, y: np.ndarray, attrs: Mapping[str, Any]) -> np.ndarray:
    """dy/dx of the unary `op` (with `attrs`) at input `x` with output `y`, in x's dtype."""
    with np.errstate(all="ignore"):  # as in the forward, NaN and inf are data
        slope = _RULES[op](x, y, **{**_DEFAULTS[op], **attrs})
    return np.asarray(slope).astype(x.dtype, copy=False)
