"""Elementwise unary graph operators written as kernel instructions, one function per operator: every activation
of `coopnn.graph.activations`, identity and not.

Targets then implement only the primitive instructions (arithmetic, exp, log, tanh, sin, ...). The formulas keep
float32 accuracy against the numpy references across the whole input range (no overflow for large |x|). Attribute
defaults are the references', from `coopnn.graph.ops.forward_defaults`: `apply` fills them in.
"""

from __future__ import annotations

import math
from typing import Callable

from coopnn.graph.activations import GELU_TANH_COEFFICIENT, SQRT_2_OVER_PI
from coopnn.graph.ir import Op
from coopnn.graph.ops import forward_defaults
from coopnn.registry import registrar
from coopnn.shaders.kernel.ops import KernelWriter

Expansion = Callable[..., str]
EXPANSIONS: dict[Op, Expansion] = {}


expansion = registrar(EXPANSIONS)  # @expansion(Op.X, ...)


def apply(k: KernelWriter, op: Op, x: str, attrs) -> str:
    return EXPANSIONS[op](k, x, **{**forward_defaults(op), **dict(attrs)})


# Activations that are one kernel instruction; their derivative is that instruction's, from the instruction table.
DIRECT: dict[Op, str] = {
    Op.EXP: "exp", Op.LOG: "log", Op.SIN: "sin", Op.COS: "cos", Op.NEG: "neg", Op.ABS: "abs", Op.SQRT: "sqrt",
    Op.TANH: "tanh", Op.FLOOR: "floor", Op.CEIL: "ceil", Op.SIGN: "sign", Op.NOT: "not",
}


def _direct(name: str) -> Expansion:
    return lambda k, x: k.unary(name, x)


for _op, _name in DIRECT.items():
    expansion(_op)(_direct(_name))


@expansion(Op.IDENTITY)
def identity(k, x):
    return x


@expansion(Op.RELU)
def relu(k, x):
    return k.scalar("max", x, 0.0)


@expansion(Op.LEAKY_RELU)
def leaky_relu(k, x, alpha):
    scaled = k.scalar("mul", x, alpha)
    if 0.0 <= alpha <= 1.0:
        return k.binary("max", x, scaled)
    return k.select(k.compare("cmp.ge", x, k.splat(0.0, k.type_of(x).size)), x, scaled)


def _negative_part(k, x, negative: str) -> str:
    """select(x > 0, x, negative)."""
    return k.select(k.compare("cmp.gt", x, k.splat(0.0, k.type_of(x).size)), x, negative)


def _expm1(k, x) -> str:
    return k.scalar("sub", k.unary("exp", x), 1.0)


@expansion(Op.ELU)
def elu(k, x, alpha):
    return _negative_part(k, x, k.scalar("mul", _expm1(k, x), alpha))


@expansion(Op.SELU)
def selu(k, x, alpha, gamma):
    return k.scalar("mul", elu(k, x, alpha), gamma)


@expansion(Op.CELU)
def celu(k, x, alpha):
    return _negative_part(k, x, k.scalar("mul", _expm1(k, k.scalar("div", x, alpha)), alpha))


@expansion(Op.SIGMOID)
def sigmoid(k, x):
    # exp(-x) overflows to inf for very negative x, and 1/(1+inf) is the correct limit 0
    return k.scalar("div", k.scalar("add", k.unary("exp", k.unary("neg", x)), 1.0), 1.0, left=True)


@expansion(Op.HARD_SIGMOID)
def hard_sigmoid(k, x, alpha, beta):
    return k.scalar("min", k.scalar("max", k.scalar("add", k.scalar("mul", x, alpha), beta), 0.0), 1.0)


@expansion(Op.HARD_SWISH)
def hard_swish(k, x):
    return k.binary("mul", x, hard_sigmoid(k, x, 1.0 / 6.0, 0.5))


@expansion(Op.SOFTPLUS)
def softplus(k, x, beta, threshold):
    bx = k.scalar("mul", x, beta) if beta != 1.0 else x
    # log(1 + exp(bx)) = max(bx, 0) + log(1 + exp(-|bx|)): no overflow for large |bx|
    tail = k.unary("log", k.scalar("add", k.unary("exp", k.unary("neg", k.unary("abs", bx))), 1.0))
    y = k.binary("add", k.scalar("max", bx, 0.0), tail)
    if beta != 1.0:
        y = k.scalar("div", y, beta)
    if threshold is not None:
        y = k.select(k.compare("cmp.gt", bx, k.splat(threshold, k.type_of(x).size)), x, y)
    return y


@expansion(Op.SOFTSIGN)
def softsign(k, x):
    return k.binary("div", x, k.scalar("add", k.unary("abs", x), 1.0))


# Abramowitz and Stegun 7.1.26: |erf error| < 1.5e-7, within float32 rounding of the reference.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


@expansion(Op.ERF)
def erf(k, x):
    a = k.unary("abs", x)
    t = k.scalar("div", k.scalar("add", k.scalar("mul", a, _ERF_P), 1.0), 1.0, left=True)
    poly = k.splat(_ERF_A[4], k.type_of(x).size)
    for coeff in reversed(_ERF_A[:4]):
        poly = k.scalar("add", k.binary("mul", poly, t), coeff)
    poly = k.binary("mul", poly, t)
    gauss = k.unary("exp", k.unary("neg", k.binary("mul", a, a)))
    magnitude = k.scalar("sub", k.binary("mul", poly, gauss), 1.0, left=True)
    return k.binary("mul", k.unary("sign", x), magnitude)


@expansion(Op.GELU)
def gelu(k, x, approximate):
    if approximate == "tanh":
        cube = k.binary("mul", k.binary("mul", x, x), x)
        inner = k.scalar("mul", k.binary("add", x, k.scalar("mul", cube, GELU_TANH_COEFFICIENT)), SQRT_2_OVER_PI)
        gate = k.scalar("add", k.unary("tanh", inner), 1.0)
    else:
        gate = k.scalar("add", erf(k, k.scalar("mul", x, 1.0 / math.sqrt(2.0))), 1.0)
    return k.binary("mul", k.scalar("mul", x, 0.5), gate)


@expansion(Op.SILU)
def silu(k, x):
    return k.binary("mul", x, sigmoid(k, x))


@expansion(Op.MISH)
def mish(k, x):
    return k.binary("mul", x, k.unary("tanh", apply(k, Op.SOFTPLUS, x, {})))


@expansion(Op.CLIP)
def clip(k, x, min, max):
    if min is not None:
        x = k.scalar("max", x, min)
    if max is not None:
        x = k.scalar("min", x, max)
    return x


@expansion(Op.TL_FUNCTION)
def tl_function(k, x, text, function, derivative):
    from coopnn.tl.functions.named import activation_function

    return k.function(activation_function(text, function), x)[0]


@expansion(Op.RECIPROCAL)
def reciprocal(k, x):
    return k.scalar("div", x, 1.0, left=True)
