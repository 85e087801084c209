"""Checker rules of the scalar instructions: arithmetic, comparison, math, cast, constant, builtins, subgroup
operations. Arithmetic also takes cooperative matrices, component-wise."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.check_base import Context, rule
from coopnn.tl.types import BOOL, I32, INDEX, CoopMatrixType, ScalarType

INTEGER_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "index": 64}


def _component(t) -> ScalarType:
    return t.component if isinstance(t, CoopMatrixType) else t


def _allowed_binary(op: str, t: ScalarType) -> bool:
    if op in ("add", "sub", "mul", "div"):
        return t.is_number
    if op in ("rem", "max", "min"):
        return t.is_number and not t.is_complex
    if op in ("shl", "shr"):
        return t.is_integer
    return t.is_integer or t.is_bool


@rule(ast.Arith)
def _arith(ctx: Context, i: ast.Arith):
    ctx.same(i.a, ctx.type_of(i.a), i.type)
    ctx.same(i.b, ctx.type_of(i.b), i.type)
    component = _component(i.type)
    if not _allowed_binary(i.op, component) or (isinstance(i.type, CoopMatrixType) and component.is_bool):
        ctx.fail(i, f"{i.op} does not take {i.type}")
    return (i.type,)


@rule(ast.Unary)
def _unary(ctx: Context, i: ast.Unary):
    operand = ctx.type_of(i.a)
    component = _component(operand)
    if not isinstance(component, ScalarType):
        ctx.fail(i.a, f"{i.op} needs a number or coopmatrix operand, got {operand}")
    allowed = {"abs": component.is_number, "neg": component.is_number, "not": component.is_integer or component.is_bool,
               "conj": component.is_complex, "im": component.is_complex, "re": component.is_complex}[i.op]
    if not allowed:
        ctx.fail(i, f"{i.op} does not take {operand}")
    wanted = operand
    if i.op in ("abs", "im", "re") and component.is_complex:
        real = component.component()
        wanted = real if isinstance(operand, ScalarType) else CoopMatrixType(real, operand.rows, operand.columns,
                                                                            operand.use)
    ctx.same(i, i.type, wanted, "Return type does not match the operand type")
    return (i.type,)


@rule(ast.Compare)
def _compare(ctx: Context, i: ast.Compare):
    a, b = ctx.scalar(i.a), ctx.scalar(i.b)
    ctx.same(i.b, b, a, "Operand types must match")
    if not a.is_number:
        ctx.fail(i, f"{i.op} compares numbers, got {a}")
    if a.is_complex and i.op not in ("equal", "not_equal"):
        ctx.fail(i, f"{i.op} does not take complex operands")
    return (BOOL,)


@rule(ast.Math)
def _math(ctx: Context, i: ast.Math):
    ctx.same(i.operand, ctx.type_of(i.operand), i.type)
    takes_complex = i.op in ("exp", "exp2", "native_exp", "native_exp2")
    if not (i.type.is_floating or (takes_complex and i.type.is_complex)):
        ctx.fail(i, f"{i.op} does not take {i.type}")
    return (i.type,)


def _scalar_cast_allowed(source: ScalarType, target: ScalarType) -> str | None:
    if not source.is_number or not target.is_number:
        return f"Cast from {source} to {target} is not allowed (casts take number types)"
    if source.is_complex and not target.is_complex:
        return f"Cast from complex type {source} to {target} is forbidden"
    return None


@rule(ast.Cast)
def _cast(ctx: Context, i: ast.Cast):
    source = ctx.type_of(i.operand)
    if isinstance(i.type, CoopMatrixType):
        if not isinstance(source, CoopMatrixType):
            ctx.fail(i.operand, f"A cast to a coopmatrix type needs a coopmatrix operand, got {source}")
        if source.shape != i.type.shape:
            ctx.fail(i, f"Cast must keep the coopmatrix shape ({source} to {i.type})")
        if source.use != i.type.use and not (source.use == "matrix_acc" and i.type.use in ("matrix_a", "matrix_b")):
            ctx.fail(i, f"Cast from use {source.use} to {i.type.use} is not allowed")
        source = source.component
    elif not isinstance(source, ScalarType):
        ctx.fail(i.operand, f"Cast operand must have a number type, got {source}")
    problem = _scalar_cast_allowed(source, _component(i.type))
    if problem:
        ctx.fail(i, problem)
    return (i.type,)


def _constant_fits(value, t: ScalarType) -> str | None:
    if t.is_bool:
        return None if isinstance(value, bool) else "a boolean type needs true or false"
    if isinstance(value, bool):
        return f"true and false are bool constants, not {t}"
    if t.is_integer:
        if not isinstance(value, int):
            return f"an integer type ({t}) needs an integer constant"
        bits = INTEGER_BITS[t.name]
        if not -(2 ** (bits - 1)) <= value < 2 ** bits:
            return f"{value} does not fit in {t}"
        return None
    if t.is_floating:
        return None if isinstance(value, float) else f"a floating type ({t}) needs a floating constant"
    return None if isinstance(value, (complex, float)) else f"a complex type ({t}) needs a complex or floating constant"


@rule(ast.Constant)
def _constant(ctx: Context, i: ast.Constant):
    problem = _constant_fits(i.value, _component(i.type))
    if problem:
        ctx.fail(i, f"Constant does not match its type: {problem}")
    ctx.constants[i.results[0].name] = i.value
    return (i.type,)


BUILTIN_TYPES = {"group_id": INDEX, "num_groups": INDEX, "num_subgroups": I32, "subgroup_size": I32,
                 "subgroup_id": I32, "subgroup_linear_id": I32, "subgroup_local_id": I32}
SPMD_BUILTINS = ("subgroup_id", "subgroup_linear_id", "subgroup_local_id")


@rule(ast.Builtin)
def _builtin(ctx: Context, i: ast.Builtin):
    if i.name in SPMD_BUILTINS and not ctx.spmd:
        ctx.fail(i, f"{i.name} is an SPMD instruction and must not appear in a collective region")
    ctx.same(i, i.type, BUILTIN_TYPES[i.name], f"{i.name} returns {BUILTIN_TYPES[i.name]}; type mismatch")
    return (i.type,)


@rule(ast.SubgroupBroadcast, spmd=True)
def _broadcast(ctx: Context, i: ast.SubgroupBroadcast):
    ctx.same(i.value, ctx.type_of(i.value), i.type)
    ctx.same(i.index, ctx.type_of(i.index), I32, "The subgroup local index must have i32 type")
    return (i.type,)


@rule(ast.SubgroupOp, spmd=True)
def _subgroup_operation(ctx: Context, i: ast.SubgroupOp):
    ctx.same(i.operand, ctx.type_of(i.operand), i.type)
    if i.op in ("max", "min") and i.type.is_complex:
        ctx.fail(i, f"subgroup {i.op} does not take complex types")
    return (i.type,)
