"""Checker rules of the instructions with regions (foreach, foreach_tile, parallel, for, if) and of yield; the regions
themselves are checked by checker.py through `Context.check_region`."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.check_base import Context, rule
from coopnn.tl.types import BOOL, CoopMatrixType, ScalarType


def _integer(ctx: Context, value: ast.Value, what: str) -> ScalarType:
    found = ctx.type_of(value)
    if not (isinstance(found, ScalarType) and found.is_integer):
        ctx.fail(value, f"{what} must have an integer type, got {found}")
    return found


def _range_types(ctx: Context, i) -> list[ScalarType]:
    if not len(i.variables) == len(i.starts) == len(i.stops):
        ctx.fail(i, f"The loop variables, starts and stops must be lists of one length "
                    f"({len(i.variables)}, {len(i.starts)}, {len(i.stops)})")
    types = []
    for start, stop in zip(i.starts, i.stops):
        start_type = _integer(ctx, start, "A loop start")
        if _integer(ctx, stop, "A loop stop") != start_type:
            ctx.fail(stop, f"The integer types of from and to must match ({start_type} vs {ctx.type_of(stop)})")
        types.append(start_type)
    return types


@rule(ast.Foreach, spmd=False)
def _foreach(ctx: Context, i: ast.Foreach):
    types = _range_types(ctx, i)
    ctx.check_region(i.body, spmd=True, defines=list(zip(i.variables, types)))
    return ()


@rule(ast.ForeachTile, spmd=False)
def _foreach_tile(ctx: Context, i: ast.ForeachTile):
    types = _range_types(ctx, i)
    if not len(i.sizes) == len(i.tile_shape) == len(i.variables):
        ctx.fail(i, "The tile size variables and the tile shape must have one entry per loop variable")
    if any(t < 1 for t in i.tile_shape):
        ctx.fail(i, "Tile shapes must be positive")
    if ctx.subgroup_size and i.tile_shape[0] % ctx.subgroup_size:
        ctx.fail(i, f"The first tile size must be a multiple of the subgroup size ({ctx.subgroup_size})")
    defines = list(zip(i.variables, types)) + list(zip(i.sizes, types))
    ctx.check_region(i.body, spmd=True, defines=defines)
    return ()


@rule(ast.Parallel, spmd=False)
def _parallel(ctx: Context, i: ast.Parallel):
    ctx.check_region(i.body, spmd=True)
    return ()


RETURNABLE = (ScalarType, CoopMatrixType)


def _returnable(ctx: Context, i, types) -> None:
    for t in types:
        if not isinstance(t, RETURNABLE):
            ctx.fail(i, f"{t} cannot be returned (boolean, number and coopmatrix types can)")


@rule(ast.For)
def _for(ctx: Context, i: ast.For):
    counter = _integer(ctx, i.start, "The loop start")
    for value in (i.stop, i.step):
        if value is not None and ctx.type_of(value) != counter:
            ctx.fail(value, f"The integer types of from, to and step must be identical ({counter} vs "
                            f"{ctx.type_of(value)})")
    if not len(i.carried) == len(i.initial) == len(i.types):
        ctx.fail(i, f"init lists {len(i.carried)} values but -> lists {len(i.types)} types")
    if len(i.results) not in (0, len(i.types)):
        ctx.fail(i, f"for returns {len(i.types)} values; {len(i.results)} named left of '='")
    _returnable(ctx, i, i.types)
    for value, wanted in zip(i.initial, i.types):
        ctx.same(value, ctx.type_of(value), wanted, "Initial value type must match the loop-carried type")
    defines = [(i.variable, counter)] + list(zip(i.carried, i.types))
    ctx.check_region(i.body, spmd=ctx.spmd, defines=defines, yields=i.types)
    return i.types[:len(i.results)] if i.results else ()


@rule(ast.If)
def _if(ctx: Context, i: ast.If):
    ctx.same(i.condition, ctx.type_of(i.condition), BOOL, "The condition must have boolean type")
    if len(i.results) not in (0, len(i.types)):
        ctx.fail(i, f"if returns {len(i.types)} values; {len(i.results)} named left of '='")
    _returnable(ctx, i, i.types)
    if i.types and i.otherwise is None:
        ctx.fail(i, "An if that returns values needs an else region")
    ctx.check_region(i.then, spmd=ctx.spmd, yields=i.types)
    if i.otherwise is not None:
        ctx.check_region(i.otherwise, spmd=ctx.spmd, yields=i.types)
    return i.types[:len(i.results)] if i.results else ()


@rule(ast.Yield)
def _yield(ctx: Context, i: ast.Yield):
    for value in i.values:
        ctx.type_of(value)
    return ()


@rule(ast.Extension, spmd=True)
def _extension(ctx: Context, i: ast.Extension):
    """coopnn's kernel instructions are checked by coopnn's kernel builder (their table in
    coopnn/shaders/kernel/ops.py); here only that their operands are defined."""
    for value in i.operands:
        ctx.type_of(value)
    return (i.type,) if i.results else ()
