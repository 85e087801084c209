"""`check(program)`: every diagnostic of a parsed program, in source order, with its source range: undefined and
twice-defined values, type and shape mismatches, forbidden casts, collective instructions in SPMD regions and SPMD
instructions in collective ones, misplaced yields, bad function and argument attributes."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl import check_collectives, check_control, check_coopmatrix, check_memory, check_scalar  # noqa: F401 rules
from coopnn.tl.check_base import COLLECTIVE_ONLY, RULES, SPMD_ONLY, Context, Unknown
from coopnn.tl.check_memory import check_layout
from coopnn.tl.errors import Diagnostic, TensorLanguageError
from coopnn.tl.types import CoopMatrixType, GroupType, MemrefType, ScalarType, VoidType



def _instruction(ctx: Context, inst: ast.Inst) -> None:
    cls = type(inst)
    try:
        if cls in COLLECTIVE_ONLY and ctx.spmd:
            ctx.fail(inst, f"Collective instruction {_name(inst)} must not appear in an SPMD region")
        if cls in SPMD_ONLY and not ctx.spmd:
            ctx.fail(inst, f"SPMD instruction {_name(inst)} must not appear in a collective region")
        types = RULES[cls](ctx, inst)
    except Unknown:
        types = (None,) * len(inst.results)
    for value, value_type in zip(inst.results, types):
        ctx.define(value, value_type)


def _name(inst: ast.Inst) -> str:
    return getattr(inst, "op", None) if isinstance(inst, ast.Collective) else type(inst).__name__.lower()


def _yields(ctx: Context, region: ast.Region, wanted: tuple) -> None:
    last = region.instructions[-1] if region.instructions else None
    if not isinstance(last, ast.Yield):
        if wanted:
            ctx.error(region, f"The region must end with yield of {len(wanted)} values")
        return
    try:
        got = tuple(ctx.type_of(v) for v in last.values)
    except Unknown:
        return
    if got != tuple(wanted):
        ctx.error(last, f"Yielded types ({', '.join(map(str, got))}) must match the returned types "
                        f"({', '.join(map(str, wanted))})")


def check_region(ctx: Context, region: ast.Region, spmd: bool, defines=(), yields: tuple | None = None) -> None:
    """Checks `region` in a scope of its own; `yields`: the types its closing yield returns (None: no yield)."""
    outer_spmd = ctx.spmd
    ctx.spmd = spmd
    ctx.scopes.append({})
    for value, value_type in defines:
        ctx.define(value, value_type)
    for index, inst in enumerate(region.instructions):
        if isinstance(inst, ast.Yield) and (yields is None or index != len(region.instructions) - 1):
            ctx.error(inst, "yield must be the last instruction of a for, if or cooperative_matrix_apply region, or of "
                            "a function with results")
        _instruction(ctx, inst)
    if yields is not None:
        _yields(ctx, region, yields)
    ctx.scopes.pop()
    ctx.spmd = outer_spmd


def _function_attributes(ctx: Context, function: ast.Function) -> None:
    size = function.attributes.get("subgroup_size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        ctx.error(function, "subgroup_size must be a positive integer")
        size = None
    ctx.subgroup_size = size
    shape = function.attributes.get("work_group_size")
    if shape is None:
        return
    if not (isinstance(shape, tuple) and len(shape) == 2 and all(type(n) is int and n > 0 for n in shape)):
        ctx.error(function, "work_group_size must be an array of 2 positive integers")
    elif size and shape[0] % size:
        ctx.error(function, f"The first mode of work_group_size ({shape[0]}) must be a multiple of the subgroup size "
                            f"({size})")


def _argument(ctx: Context, argument: ast.Argument) -> None:
    where = argument.value
    if isinstance(argument.type, (CoopMatrixType, VoidType)):
        ctx.error(where, f"Arguments must not have {argument.type} type")
    memref = argument.type.memref if isinstance(argument.type, GroupType) else argument.type
    if isinstance(memref, MemrefType):
        check_layout(ctx, where, memref)
        if memref.space != "global":
            ctx.error(where, "Arguments are memrefs of the global address space")
    elif argument.attributes.items:
        ctx.error(where, "Only memref and group arguments take attributes")
        return
    alignment = argument.attributes.get("alignment")
    if alignment is not None and (type(alignment) is not int or alignment % memref.element.size):
        ctx.error(where, f"The alignment must be a multiple of the element size ({memref.element.size})")
    for name in ("shape_gcd", "stride_gcd"):
        divisors = argument.attributes.get(name)
        if divisors is not None and (not isinstance(divisors, tuple) or len(divisors) > memref.order):
            ctx.error(where, f"{name} takes at most one divisor per mode ({memref.order})")


def check_function(function: ast.Function) -> list[Diagnostic]:
    ctx = Context()
    ctx.check_region = lambda region, **kw: check_region(ctx, region, **kw)
    _function_attributes(ctx, function)
    for argument in function.arguments:
        _argument(ctx, argument)
        ctx.define(argument.value, argument.type)
    for result in function.results:
        if not isinstance(result, ScalarType):
            ctx.error(function, f"Functions return scalars, not {result}")
    check_region(ctx, function.body, spmd=False, yields=function.results or None)
    return ctx.diagnostics


def check(program: ast.Program) -> list[Diagnostic]:
    """Every diagnostic of `program`, function by function, in the order found."""
    diagnostics = []
    names = set()
    for function in program.functions:
        if function.name in names:
            diagnostics.append(Diagnostic(function.span, f"Function @{function.name} is defined twice"))
        names.add(function.name)
        diagnostics.extend(check_function(function))
    return diagnostics


def checked(program: ast.Program, source_name: str = "") -> ast.Program:
    """`program` if it checks; TensorLanguageError with every diagnostic otherwise."""
    diagnostics = check(program)
    if diagnostics:
        raise TensorLanguageError(diagnostics, source_name)
    return program
