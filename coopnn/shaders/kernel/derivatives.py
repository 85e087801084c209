"""Derivatives of the elementwise unary operators written as kernel instructions: dy/dx from the input x and the
output y, what a training kernel's backward pass multiplies the incoming delta by.

These rules are the only definition of the activations' derivatives: the numpy backend evaluates the same rules on
arrays (`coopnn.train.activation_grads`, through `eager.NumpyKernel`). An activation that is one kernel instruction
(`activations.DIRECT`) takes that instruction's derivative from the instruction table (`ops.KERNEL_OPS`); the others
have a rule here. Each takes the branch the forward takes at a kink (relu'(0) = 0, |x|'(0) = 0) and overflow-free
forms (the logistic function as 0.5 + 0.5 tanh(x / 2), exp(min(x, 0)) on the negative side of selu and celu).
Attribute defaults are the forward's, from `coopnn.graph.ops.forward_defaults`. Floor, ceil and sign are constant
almost everywhere, so nothing can train through them: they have no rule, and asking for one is a compile error.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from coopnn.errors import CompileError
from coopnn.graph.activations import GELU_TANH_COEFFICIENT, SQRT_2_OVER_PI
from coopnn.graph.ir import Op
from coopnn.graph.ops import forward_defaults
from coopnn.registry import registrar
from coopnn.shaders.kernel.activations import DIRECT
from coopnn.shaders.kernel.ops import KERNEL_OPS, KernelWriter

Rule = Callable[..., str]  # (k, x, y, **attributes) -> dy/dx
# every differentiable activation: the direct ones (filled in below, from the instruction table) and the rules here
DERIVATIVES: dict[Op, Rule] = {}


_rule = registrar(DERIVATIVES)  # @_rule(Op.X)


def derivative(k: KernelWriter, op: Op, x: str, y: str, attrs: Mapping[str, Any]) -> str:
    """The kernel value dy/dx of the unary `op` (with `attrs`) at input `x` with output `y`."""
    if op not in DERIVATIVES:
        raise CompileError(f"cannot train through {op.value}: it has no derivative (it is constant almost everywhere "
                           f"or not differentiable); differentiable: {', '.join(sorted(o.value for o in DERIVATIVES))}")
    return DERIVATIVES[op](k, x, y, **{**forward_defaults(op), **dict(attrs)})


def logistic(k: KernelWriter, x: str) -> str:
    """0.5 + 0.5 tanh(x / 2): the logistic function without the overflow of exp(-x) for very negative x."""
    return k.scalar("add", k.scalar("mul", k.unary("tanh", k.scalar("mul", x, 0.5)), 0.5), 0.5)


def _splat(k: KernelWriter, x: str, value: float) -> str:
    return k.splat(value, k.type_of(x).size)


def _where(k: KernelWriter, cond: str, a: float | str, b: float | str, like: str) -> str:
    """select(cond, a, b) where a constant operand is splat to the size of `like`."""
    a = a if isinstance(a, str) else _splat(k, like, a)
    b = b if isinstance(b, str) else _splat(k, like, b)
    return k.select(cond, a, b)


def _positive(k: KernelWriter, x: str) -> str:
    return k.compare("cmp.gt", x, _splat(k, x, 0.0))


@_rule(Op.RELU)
def relu(k, x, y):
    return k.unary("positive", x)


@_rule(Op.LEAKY_RELU)
def leaky_relu(k, x, y, alpha):
    # the forward takes x itself at 0, so the slope there is 1
    return _where(k, k.compare("cmp.ge", x, _splat(k, x, 0.0)), 1.0, alpha, x)


@_rule(Op.ELU)
def elu(k, x, y, alpha):
    # y + alpha is alpha exp(x) on the negative side, without an exp that could overflow on the positive side
    return _where(k, _positive(k, x), 1.0, k.scalar("add", y, alpha), x)


def _exp_of_negative_part(k, x, scale: float) -> str:
    """exp(min(x, 0) / scale): the negative branch's slope, which must not overflow where the branch is unused."""
    negative = k.scalar("min", x, 0.0)
    return k.unary("exp", negative if scale == 1.0 else k.scalar("div", negative, scale))


@_rule(Op.SELU)
def selu(k, x, y, alpha, gamma):
    negative = k.scalar("mul", _exp_of_negative_part(k, x, 1.0), alpha)
    return k.scalar("mul", _where(k, _positive(k, x), 1.0, negative, x), gamma)


@_rule(Op.CELU)
def celu(k, x, y, alpha):
    return _where(k, _positive(k, x), 1.0, _exp_of_negative_part(k, x, alpha), x)


@_rule(Op.SIGMOID)
def sigmoid(k, x, y):
    return k.binary("mul", y, k.scalar("sub", y, 1.0, left=True))


@_rule(Op.HARD_SIGMOID)
def hard_sigmoid(k, x, y, alpha, beta):
    z = k.scalar("add", k.scalar("mul", x, alpha), beta)
    inside = k.binary("and", _positive(k, z), k.compare("cmp.lt", z, _splat(k, z, 1.0)))
    return _where(k, inside, alpha, 0.0, x)


@_rule(Op.HARD_SWISH)
def hard_swish(k, x, y):
    ramp = k.scalar("add", k.scalar("div", x, 3.0), 0.5)
    middle = _where(k, k.compare("cmp.gt", x, _splat(k, x, 3.0)), 1.0, ramp, x)
    return _where(k, k.compare("cmp.lt", x, _splat(k, x, -3.0)), 0.0, middle, x)


@_rule(Op.SOFTPLUS)
def softplus(k, x, y, beta, threshold):
    bx = k.scalar("mul", x, beta)
    slope = logistic(k, bx)
    if threshold is None:
        return slope
    return _where(k, k.compare("cmp.gt", bx, _splat(k, bx, threshold)), 1.0, slope, x)


@_rule(Op.SOFTSIGN)
def softsign(k, x, y):
    denominator = k.scalar("add", k.unary("abs", x), 1.0)
    return k.scalar("div", k.binary("mul", denominator, denominator), 1.0, left=True)


@_rule(Op.GELU)
def gelu(k, x, y, approximate):
    if approximate == "tanh":
        scale = SQRT_2_OVER_PI
        cube = k.binary("mul", k.binary("mul", x, x), x)
        t = k.unary("tanh", k.scalar("mul", k.binary("add", x, k.scalar("mul", cube, GELU_TANH_COEFFICIENT)), scale))
        gate = k.scalar("mul", k.scalar("add", t, 1.0), 0.5)
        # 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 c x^2), multiplied left to right as the numpy rule is
        one_minus_t2 = k.scalar("sub", k.binary("mul", t, t), 1.0, left=True)
        curve = k.scalar("mul", k.binary("mul", k.scalar("mul", x, 0.5), one_minus_t2), scale)
        inner = k.scalar("add", k.binary("mul", k.scalar("mul", x, 3 * GELU_TANH_COEFFICIENT), x), 1.0)
        return k.binary("add", gate, k.binary("mul", curve, inner))
    erf = k.activation(Op.ERF, k.scalar("div", x, math.sqrt(2)), {})
    cdf = k.scalar("mul", k.scalar("add", erf, 1.0), 0.5)
    gauss = k.unary("exp", k.binary("mul", k.scalar("mul", x, -0.5), x))
    return k.binary("add", cdf, k.scalar("div", k.binary("mul", x, gauss), math.sqrt(2 * math.pi)))


@_rule(Op.SILU)
def silu(k, x, y):
    s = logistic(k, x)
    return k.binary("mul", s, k.scalar("add", k.binary("mul", x, k.scalar("sub", s, 1.0, left=True)), 1.0))


@_rule(Op.MISH)
def mish(k, x, y):
    t = k.unary("tanh", k.activation(Op.SOFTPLUS, x, {}))
    one_minus_t2 = k.scalar("sub", k.binary("mul", t, t), 1.0, left=True)
    return k.binary("add", t, k.binary("mul", k.binary("mul", x, one_minus_t2), logistic(k, x)))


@_rule(Op.CLIP)
def clip(k, x, y, min, max):
    bounds = [k.compare(cmp, x, _splat(k, x, bound)) for cmp, bound in (("cmp.ge", min), ("cmp.le", max))
              if bound is not None]
    if not bounds:
        return _splat(k, x, 1.0)
    inside = bounds[0] if len(bounds) == 1 else k.binary("and", *bounds)
    return _where(k, inside, 1.0, 0.0, x)


@_rule(Op.RECIPROCAL)
def reciprocal(k, x, y):
    return k.binary("mul", k.unary("neg", y), y)


@_rule(Op.ERF)
def erf(k, x, y):
    return k.scalar("mul", k.unary("exp", k.unary("neg", k.binary("mul", x, x))), 2 / math.sqrt(math.pi))


@_rule(Op.TL_FUNCTION)
def tl_function(k, x, y, text, function, derivative):
    from coopnn.tl.functions.named import derivative_function

    return k.function(derivative_function(text, function, derivative, 1), x)[0]


@_rule(Op.IDENTITY)
def identity(k, x, y):
    return _splat(k, x, 1.0)


for _op, _name in DIRECT.items():
    if KERNEL_OPS[_name].derivative is not None:
        DERIVATIVES[_op] = KERNEL_OPS[_name].derivative
