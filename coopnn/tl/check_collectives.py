"""Checker rules of the collective instructions (axpby, cumsum, gemm, gemv, ger, hadamard, sum): operand kinds,
orders, shapes where known, the promotion chains of the reference and the atomic flag's beta in {0, 1}."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.check_base import Context, rule
from coopnn.tl.types import MemrefType, ScalarType, promotable, promote


def _transposed(memref: MemrefType, transpose: str) -> tuple:
    shape = memref.shape
    return shape[::-1] if transpose == "t" and len(shape) == 2 else shape


def _agree(ctx: Context, i, a, b, what: str) -> None:
    """Sizes `a` and `b` must be equal where both are known."""
    if a is not None and b is not None and a != b:
        ctx.fail(i, f"Shape mismatch: {what} ({a} vs {b})")


def _promotes(ctx: Context, i, chain: list[tuple[str, ScalarType]]) -> None:
    for (low_name, low), (high_name, high) in zip(chain, chain[1:]):
        if low is None or high is None or not promotable(low, high):
            ctx.fail(i, f"{low_name} ({low}) must be promotable to {high_name} ({high})")


def _operands(ctx: Context, i: ast.Collective, kinds: str):
    """The operands' types: 's' a scalar, 'm' a memref."""
    found = []
    for value, kind in zip(i.operands, kinds):
        found.append(ctx.scalar(value) if kind == "s" else ctx.memref(value))
    return found


def _beta_for_atomic(ctx: Context, i: ast.Collective, beta: ast.Value) -> None:
    if i.atomic and ctx.constants.get(beta.name) not in (0, 1):
        ctx.fail(beta, "With the atomic flag, beta must be a constant 0 or 1")


def _orders(ctx: Context, i, pairs) -> None:
    for memref, allowed, name in pairs:
        if memref.order not in allowed:
            ctx.fail(i, f"order({name}) must be {' or '.join(map(str, allowed))}, got {memref.order}")


@rule(ast.Collective, spmd=False)
def _collective(ctx: Context, i: ast.Collective):
    CHECKS[i.op](ctx, i)
    _beta_for_atomic(ctx, i, i.operands[-2])
    return ()


def _axpby(ctx: Context, i: ast.Collective):
    alpha, a, beta, b = _operands(ctx, i, "smsm")
    _orders(ctx, i, [(b, (0, 1, 2), "B")])
    op_a = _transposed(a, i.transposes[0])
    if len(op_a) != b.order:
        ctx.fail(i, f"shape(B) must equal shape(op(A)): orders {b.order} and {len(op_a)}")
    for k, (x, y) in enumerate(zip(b.shape, op_a)):
        _agree(ctx, i, x, y, f"mode {k} of B and op(A)")
    _promotes(ctx, i, [("type(alpha)", alpha), ("element_type(A)", a.element), ("element_type(B)", b.element)])
    _promotes(ctx, i, [("type(beta)", beta), ("element_type(B)", b.element)])


def _cumsum(ctx: Context, i: ast.Collective):
    alpha, a, beta, b = _operands(ctx, i, "smsm")
    if a.order < 1:
        ctx.fail(i, "order(A) must be at least 1")
    if a.order != b.order:
        ctx.fail(i, "shape(A) must equal shape(B)")
    for k, (x, y) in enumerate(zip(a.shape, b.shape)):
        _agree(ctx, i, x, y, f"mode {k} of A and B")
    if not 0 <= i.mode < a.order:
        ctx.fail(i, f"The summation mode {i.mode} is out of range (order {a.order})")
    _promotes(ctx, i, [("type(alpha)", alpha), ("element_type(A)", a.element), ("element_type(B)", b.element)])
    _promotes(ctx, i, [("type(beta)", beta), ("element_type(B)", b.element)])


def _products(ctx: Context, i, alpha, a, b, beta, c) -> None:
    ab = promote(a.element, b.element)
    if ab is None:
        ctx.fail(i, f"The element types of A and B ({a.element}, {b.element}) cannot be promoted to one type")
    _promotes(ctx, i, [("type(alpha)", alpha), ("promote(A, B)", ab), ("element_type(C)", c.element)])
    _promotes(ctx, i, [("type(beta)", beta), ("element_type(C)", c.element)])


def _gemm(ctx: Context, i: ast.Collective):
    alpha, a, b, beta, c = _operands(ctx, i, "smmsm")
    _orders(ctx, i, [(a, (2,), "A"), (b, (2,), "B"), (c, (2,), "C")])
    op_a, op_b = _transposed(a, i.transposes[0]), _transposed(b, i.transposes[1])
    _agree(ctx, i, op_a[1], op_b[0], "columns(op(A)) and rows(op(B))")
    _agree(ctx, i, c.shape[0], op_a[0], "rows(C) and rows(op(A))")
    _agree(ctx, i, c.shape[1], op_b[1], "columns(C) and columns(op(B))")
    _products(ctx, i, alpha, a, b, beta, c)


def _gemv(ctx: Context, i: ast.Collective):
    alpha, a, b, beta, c = _operands(ctx, i, "smmsm")
    _orders(ctx, i, [(a, (2,), "A"), (b, (1,), "b"), (c, (1,), "c")])
    op_a = _transposed(a, i.transposes[0])
    _agree(ctx, i, op_a[1], b.shape[0], "columns(op(A)) and rows(b)")
    _agree(ctx, i, c.shape[0], op_a[0], "rows(c) and rows(op(A))")
    _products(ctx, i, alpha, a, b, beta, c)


def _ger(ctx: Context, i: ast.Collective):
    alpha, a, b, beta, c = _operands(ctx, i, "smmsm")
    _orders(ctx, i, [(a, (1,), "a"), (b, (1,), "b"), (c, (2,), "C")])
    _agree(ctx, i, c.shape[0], a.shape[0], "rows(C) and rows(a)")
    _agree(ctx, i, c.shape[1], b.shape[0], "columns(C) and rows(b)")
    _products(ctx, i, alpha, a, b, beta, c)


def _hadamard(ctx: Context, i: ast.Collective):
    alpha, a, b, beta, c = _operands(ctx, i, "smmsm")
    _orders(ctx, i, [(a, (1, 2), "a")])
    if not a.order == b.order == c.order:
        ctx.fail(i, f"order(a), order(b) and order(c) must be equal ({a.order}, {b.order}, {c.order})")
    for k in range(a.order):
        _agree(ctx, i, a.shape[k], b.shape[k], f"mode {k} of a and b")
        _agree(ctx, i, a.shape[k], c.shape[k], f"mode {k} of a and c")
    _products(ctx, i, alpha, a, b, beta, c)


def _sum(ctx: Context, i: ast.Collective):
    alpha, a, beta, b = _operands(ctx, i, "smsm")
    _orders(ctx, i, [(b, (0, 1), "b")])
    if a.order != b.order + 1:
        ctx.fail(i, f"order(A) must be order(b)+1 ({a.order} vs {b.order})")
    if b.order == 1:
        _agree(ctx, i, b.shape[0], _transposed(a, i.transposes[0])[0], "rows(b) and rows(op(A))")
    _promotes(ctx, i, [("type(alpha)", alpha), ("element_type(A)", a.element), ("element_type(B)", b.element)])
    _promotes(ctx, i, [("type(beta)", beta), ("element_type(B)", b.element)])


CHECKS = {"axpby": _axpby, "cumsum": _cumsum, "gemm": _gemm, "gemv": _gemv, "ger": _ger, "hadamard": _hadamard,
          "sum": _sum}
