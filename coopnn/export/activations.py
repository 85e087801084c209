"""The elementwise unary operators as scalar float functions of `x`, in the syntax GLSL and Slang share: what the
exported shaders apply after a layer (a fused activation) and what the input stage's unary nodes lower to.

Each row is a function of the operator's attributes (their defaults from `coopnn.graph.ops.forward_defaults`) giving
the body of `float f(float x)`. The formulas follow the numpy references of `coopnn.graph.activations` and keep
large |x| finite (sigmoid and softplus through exp(-|x|), tanh through a clamp: tanh(15) is 1 in float32).
"""

from __future__ import annotations

import re
from typing import Callable

from coopnn.errors import CompileError
from coopnn.export.scalar import literal
from coopnn.graph.activations import GELU_TANH_COEFFICIENT, SQRT_2_OVER_PI
from coopnn.graph.ir import Op
from coopnn.graph.ops import forward_defaults

Body = Callable[..., str]

_SIGMOID = "(x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)))"
_SOFTPLUS = "(max(x, 0.0) + log(1.0 + exp(-abs(x))))"
_TANH = "tanh(clamp(x, -15.0, 15.0))"


def _in(body: str, x: str) -> str:
    """`body` with its argument `x` replaced by the expression `x`."""
    operand = x if re.fullmatch(r"[\w\[\]]+", x) else f"({x})"
    return re.sub(r"\bx\b", operand, body)


def _softplus(beta: float, threshold: float | None) -> str:
    scaled = f"(x * {literal(beta)})"
    body = f"({_in(_SOFTPLUS, scaled)} / {literal(beta)})"
    return body if threshold is None else f"({scaled} > {literal(threshold)} ? x : {body})"


def _clip(min: float | None, max: float | None) -> str:
    body = "x"
    if min is not None:
        body = f"max({body}, {literal(min)})"
    if max is not None:
        body = f"min({body}, {literal(max)})"
    return body


BODIES: dict[Op, Body] = {
    Op.IDENTITY: lambda: "x",
    Op.RELU: lambda: "max(x, 0.0)",
    Op.LEAKY_RELU: lambda alpha: f"(x >= 0.0 ? x : {literal(alpha)} * x)",
    Op.ELU: lambda alpha: f"(x > 0.0 ? x : {literal(alpha)} * (exp(x) - 1.0))",
    Op.SELU: lambda alpha, gamma: f"({literal(gamma)} * (x > 0.0 ? x : {literal(alpha)} * (exp(x) - 1.0)))",
    Op.CELU: lambda alpha: f"(max(x, 0.0) + min(0.0, {literal(alpha)} * (exp(x / {literal(alpha)}) - 1.0)))",
    Op.SIGMOID: lambda: _SIGMOID,
    Op.HARD_SIGMOID: lambda alpha, beta: f"clamp({literal(alpha)} * x + {literal(beta)}, 0.0, 1.0)",
    Op.HARD_SWISH: lambda: "(x * clamp(x / 6.0 + 0.5, 0.0, 1.0))",
    Op.TANH: lambda: _TANH,
    Op.SOFTPLUS: _softplus,
    Op.SOFTSIGN: lambda: "(x / (1.0 + abs(x)))",
    Op.SILU: lambda: f"(x * {_SIGMOID})",
    Op.MISH: lambda: f"(x * {_in(_TANH, _SOFTPLUS)})",
    Op.CLIP: _clip,
    Op.EXP: lambda: "exp(x)",
    Op.LOG: lambda: "log(x)",
    Op.SIN: lambda: "sin(x)",
    Op.COS: lambda: "cos(x)",
    Op.NEG: lambda: "(-x)",
    Op.ABS: lambda: "abs(x)",
    Op.SQRT: lambda: "sqrt(x)",
    Op.RECIPROCAL: lambda: "(1.0 / x)",
    Op.FLOOR: lambda: "floor(x)",
    Op.CEIL: lambda: "ceil(x)",
    Op.SIGN: lambda: "sign(x)",
}


def _gelu(approximate: str) -> str:
    if approximate != "tanh":
        raise KeyError(approximate)
    inner = f"({literal(SQRT_2_OVER_PI)} * (x + {literal(GELU_TANH_COEFFICIENT)} * x * x * x))"
    return f"(0.5 * x * (1.0 + {_in(_TANH, inner)}))"


BODIES[Op.GELU] = _gelu


def body(op: Op, attrs, what: str) -> str:
    """The body of `float f(float x)` computing `op` with `attrs`; CompileError naming `what` (the node) for an
    operator or attribute value no shader function here expresses."""
    write = BODIES.get(op)
    values = {**forward_defaults(op), **dict(attrs)} if write is not None else {}
    try:
        if write is None:
            raise KeyError(op)
        return write(**values)
    except (KeyError, TypeError):
        detail = f" with {values}" if write is not None else ""
        raise CompileError(f"{what}: {op.value}{detail} has no shader function in the export (exported "
                           f"elementwise operators: {', '.join(sorted(o.value for o in BODIES))}, gelu only with "
                           f"approximate='tanh')") from None


def apply(op: Op, attrs, x: str, what: str) -> str:
    """The expression computing `op` on the expression `x`."""
    return _in(body(op, attrs, what), x)
