"""Forward-mode differentiation over the tensor-language IR: a model function to its derivative function, a new
`ast.Function` with the same arguments whose results are the derivatives of the results in one argument.

Every instruction is kept and followed by the instructions of its tangent (a tangent known to be zero is None and
emits nothing); an `if` carries its results' tangents as further results, yielded by both regions. The rules take
the branch the forward takes at a kink: max and min the first operand at a tie, abs a zero slope at 0 (as the
kernel's activation rules do). rem is discontinuous and has no rule: a function using it trains with a derivative
function of its own. The derived function is checked like any parsed one (the pass's verifier).
"""

from __future__ import annotations

import math
from typing import Callable

from coopnn.registry import registrar
from coopnn.tl import ast
from coopnn.tl.checker import checked
from coopnn.tl.errors import Diagnostic, TensorLanguageError
from coopnn.tl.parse_base import FreshNames
from coopnn.tl.printer import function_text
from coopnn.tl.types import F32

Rule = Callable[["_Deriver", ast.Inst, dict], tuple]
RULES: dict[type, Rule] = {}
_rule = registrar(RULES)
_LN2 = math.log(2.0)


class NoDerivative(TensorLanguageError):
    """A model function that coopnn cannot differentiate (naming the instruction's line and column)."""


class _Deriver:
    """Writes the instructions of one region at a time."""

    def __init__(self, function: ast.Function):
        self.fresh = FreshNames(function_text(function))
        self.body: list[ast.Inst] = []

    def emit(self, cls: type, **fields) -> ast.Value:
        result = ast.Value(self.fresh.take("d"))
        self.body.append(cls(results=(result,), **fields))
        return result

    def constant(self, value: float) -> ast.Value:
        return self.emit(ast.Constant, value=float(value), type=F32)

    def arith(self, op: str, a: ast.Value, b: ast.Value) -> ast.Value:
        return self.emit(ast.Arith, op=op, a=a, b=b, type=F32)

    def neg(self, a: ast.Value) -> ast.Value:
        return self.emit(ast.Unary, op="neg", a=a, type=F32)

    def math(self, op: str, a: ast.Value) -> ast.Value:
        return self.emit(ast.Math, op=op, operand=a, type=F32)

    def compare(self, op: str, a: ast.Value, b: ast.Value) -> ast.Value:
        return self.emit(ast.Compare, op=op, a=a, b=b)

    def materialized(self, tangent: ast.Value | None) -> ast.Value:
        return self.constant(0.0) if tangent is None else tangent

    def choose(self, condition: ast.Value, a: ast.Value | None, b: ast.Value | None) -> ast.Value | None:
        """a where `condition` holds, else b (None: zero)."""
        if a is None and b is None:
            return None
        a, b = self.materialized(a), self.materialized(b)
        return self.emit(ast.If, condition=condition, types=(F32,), then=ast.Region((ast.Yield(values=(a,)),)),
                         otherwise=ast.Region((ast.Yield(values=(b,)),)))

    def plus(self, a: ast.Value | None, b: ast.Value | None) -> ast.Value | None:
        if a is None or b is None:
            return a if b is None else b
        return self.arith("add", a, b)

    def times(self, tangent: ast.Value | None, factor: ast.Value) -> ast.Value | None:
        return None if tangent is None else self.arith("mul", tangent, factor)

    def region(self, region: ast.Region, tangents: dict, closing: Callable[[ast.Yield, dict], ast.Yield],
               prefix: tuple[ast.Inst, ...] = ()) -> ast.Region:
        """`region` with its tangent instructions; `closing` rewrites its yield given the tangents in scope."""
        saved, self.body = self.body, list(prefix)
        scope = dict(tangents)
        for inst in region.instructions:
            if isinstance(inst, ast.Yield):
                self.body.append(closing(inst, scope))
                continue
            if not isinstance(inst, ast.If):
                self.body.append(inst)
            made = RULES[type(inst)](self, inst, scope)
            for result, tangent in zip(inst.results, made):
                scope[result.name] = tangent
        body, self.body = self.body, saved
        return ast.Region(tuple(body))


def derivative(function: ast.Function, wrt: int) -> ast.Function:
    """The function of `function`'s arguments whose results are d result / d argument `wrt` (NoDerivative naming
    the instruction where a rule is missing)."""
    d = _Deriver(function)
    seed = ast.Value(d.fresh.take("seed"))
    tangents = {a.value.name: seed if index == wrt else None for index, a in enumerate(function.arguments)}

    def closing(inst: ast.Yield, scope: dict) -> ast.Yield:
        return ast.Yield(values=tuple(d.materialized(scope.get(v.name)) for v in inst.values))

    body = d.region(function.body, tangents, closing, (ast.Constant(results=(seed,), value=1.0, type=F32),))
    derived = ast.Function(f"{function.name}_derivative", function.arguments, ast.DictAttr(), body,
                           function.span, (F32,) * len(function.results))
    return checked(ast.Program((derived,))).functions[0]


@_rule(ast.Constant, ast.Compare)
def _no_tangent(d: _Deriver, i, scope):
    return (None,)


@_rule(ast.Arith)
def _arith(d: _Deriver, i: ast.Arith, scope):
    if i.type != F32:
        return (None,)
    a, b, y = i.a, i.b, i.results[0]
    ta, tb = scope.get(a.name), scope.get(b.name)
    if i.op == "rem":
        raise NoDerivative([Diagnostic(i.span, "rem has no derivative (it is discontinuous): give the function's "
                                               "derivative as a function of its own (derivative='@name')")])
    if ta is None and tb is None:
        return (None,)
    if i.op == "add":
        return (d.plus(ta, tb),)
    if i.op == "sub":
        return (ta if tb is None else d.neg(tb) if ta is None else d.arith("sub", ta, tb),)
    if i.op == "mul":
        return (d.plus(d.times(ta, b), d.times(tb, a)),)
    if i.op == "div":
        # d(a / b) = (da - y db) / b
        moved = None if tb is None else d.arith("mul", y, tb)
        numerator = ta if moved is None else d.neg(moved) if ta is None else d.arith("sub", ta, moved)
        return (d.arith("div", numerator, b),)
    first = d.compare("greater_than_equal" if i.op == "max" else "less_than_equal", a, b)
    return (d.choose(first, ta, tb),)


@_rule(ast.Unary)
def _unary(d: _Deriver, i: ast.Unary, scope):
    ta = scope.get(i.a.name)
    if i.type != F32 or ta is None:
        return (None,)
    if i.op == "neg":
        return (d.neg(ta),)
    zero = d.constant(0.0)
    below = d.choose(d.compare("less_than", i.a, zero), d.neg(ta), None)
    return (d.choose(d.compare("greater_than", i.a, zero), ta, below),)


@_rule(ast.Math)
def _math(d: _Deriver, i: ast.Math, scope):
    ta, x, y = scope.get(i.operand.name), i.operand, i.results[0]
    if ta is None:
        return (None,)
    native = "native_" if i.op.startswith("native_") else ""
    op = i.op.removeprefix("native_")
    if op == "exp":
        return (d.arith("mul", ta, y),)
    if op == "exp2":
        return (d.arith("mul", d.arith("mul", ta, y), d.constant(_LN2)),)
    if op == "log":
        return (d.arith("div", ta, x),)
    if op == "log2":
        return (d.arith("div", ta, d.arith("mul", x, d.constant(_LN2))),)
    if op == "sin":
        return (d.arith("mul", ta, d.math(native + "cos", x)),)
    return (d.neg(d.arith("mul", ta, d.math(native + "sin", x))),)


@_rule(ast.If)
def _if(d: _Deriver, i: ast.If, scope):
    if not i.types:
        return ()

    def closing(inst: ast.Yield, inner: dict) -> ast.Yield:
        floats = [v for v, t in zip(inst.values, i.types) if t == F32]
        return ast.Yield(values=inst.values + tuple(d.materialized(inner.get(v.name)) for v in floats))

    then = d.region(i.then, scope, closing)
    otherwise = d.region(i.otherwise, scope, closing)
    extra = tuple(ast.Value(d.fresh.take("d")) for t in i.types if t == F32)
    d.body.append(ast.If(results=i.results + extra, condition=i.condition, types=i.types + (F32,) * len(extra),
                         then=then, otherwise=otherwise, span=i.span))
    remaining = iter(extra)
    return tuple(next(remaining) if value_type == F32 else None for value_type in i.types)
