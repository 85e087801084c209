"""A model function written with a kernel writer (`coopnn.shaders.kernel.ops.KernelWriter`): as kernel instructions on
coopvectors (`KernelBuilder`, every component at once), so the portable and coopvec targets fuse it into the model's
SPIR-V, or as float32 SPIR-V scalars (`ScalarWriter`: encodings, tile epilogues). `if` computes both regions and
selects: a fused function has no side effects, so that is what the branch means.

Instructions without a kernel instruction of their own: exp2 and log2 go through exp and log with the factor ln 2;
`native_` forms are the plain ones; not_equal is not(equal); rem is a - b trunc(a / b), trunc(q) = sign(q) floor(|q|).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from coopnn.registry import registrar
from coopnn.tl import ast
from coopnn.tl.types import BOOL

Lowering = Callable[[Any, ast.Inst, dict, int], tuple]
LOWERINGS: dict[type, Lowering] = {}
_lowers = registrar(LOWERINGS)

COMPARISONS = {"less_than": "cmp.lt", "less_than_equal": "cmp.le", "greater_than": "cmp.gt",
               "greater_than_equal": "cmp.ge", "equal": "cmp.eq"}
_LN2 = math.log(2.0)


def apply(k, function: ast.Function, arguments: Sequence[Any]) -> tuple:
    """The kernel values of `function`'s results for the kernel values `arguments` (all of one size)."""
    size = k.type_of(arguments[0]).size
    env = {a.value.name: x for a, x in zip(function.arguments, arguments)}
    return _region(k, function.body, env, size)


def _region(k, region: ast.Region, env: dict, size: int) -> tuple:
    scope = dict(env)
    for inst in region.instructions:
        if isinstance(inst, ast.Yield):
            return tuple(scope[v.name] for v in inst.values)
        for name, value in zip(inst.results, LOWERINGS[type(inst)](k, inst, scope, size)):
            scope[name.name] = value
    return ()


@_lowers(ast.Constant)
def _constant(k, i: ast.Constant, env, size):
    return (k.splat(i.value, size, "bool" if i.type == BOOL else "f32"),)


def _remainder(k, a, b):
    quotient = k.binary("div", a, b)
    whole = k.binary("mul", k.unary("sign", quotient), k.unary("floor", k.unary("abs", quotient)))
    return k.binary("sub", a, k.binary("mul", b, whole))


@_lowers(ast.Arith)
def _arith(k, i: ast.Arith, env, size):
    a, b = env[i.a.name], env[i.b.name]
    return (_remainder(k, a, b) if i.op == "rem" else k.binary(i.op, a, b),)


@_lowers(ast.Unary)
def _unary(k, i: ast.Unary, env, size):
    return (k.unary(i.op, env[i.a.name]),)


@_lowers(ast.Math)
def _math(k, i: ast.Math, env, size):
    x, op = env[i.operand.name], i.op.removeprefix("native_")
    if op == "exp2":
        return (k.unary("exp", k.scalar("mul", x, _LN2)),)
    if op == "log2":
        return (k.scalar("mul", k.unary("log", x), 1.0 / _LN2),)
    return (k.unary(op, x),)


@_lowers(ast.Compare)
def _compare(k, i: ast.Compare, env, size):
    a, b = env[i.a.name], env[i.b.name]
    if i.op == "not_equal":
        return (k.unary("not", k.compare("cmp.eq", a, b)),)
    return (k.compare(COMPARISONS[i.op], a, b),)


@_lowers(ast.If)
def _if(k, i: ast.If, env, size):
    if not i.types:
        return ()
    then = _region(k, i.then, env, size)
    otherwise = _region(k, i.otherwise, env, size)
    condition = env[i.condition.name]
    return tuple(k.select(condition, a, b) for a, b in zip(then, otherwise))
