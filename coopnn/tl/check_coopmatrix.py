"""Checker rules of the cooperative-matrix instructions (SPMD instructions: they run on a subgroup)."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.check_base import Context, rule
from coopnn.tl.types import I32, CoopMatrixType, promotable, promote


def coopmatrix(ctx: Context, value: ast.Value, what: str = "Operand") -> CoopMatrixType:
    found = ctx.type_of(value)
    if not isinstance(found, CoopMatrixType):
        ctx.fail(value, f"{what} must have coopmatrix type, got {found}")
    return found


def _rows_fit_subgroup(ctx: Context, where, matrix: CoopMatrixType) -> None:
    if ctx.subgroup_size and matrix.rows % ctx.subgroup_size:
        ctx.fail(where, f"The rows of {matrix} must be a multiple of the subgroup size ({ctx.subgroup_size})")


def _position(ctx: Context, i, element) -> None:
    memref = ctx.memref(i.tensor)
    if memref.order != 2:
        ctx.fail(i.tensor, f"Cooperative matrices are loaded from and stored to 2d memrefs, got {memref}")
    if element is not None and memref.element != element:
        ctx.fail(i, f"The component type ({element}) must match the memref's element type ({memref.element})")
    ctx.index(i.row)
    ctx.index(i.column)


@rule(ast.CoopLoad, spmd=True)
def _load(ctx: Context, i: ast.CoopLoad):
    _position(ctx, i, i.type.component)
    _rows_fit_subgroup(ctx, i, i.type)
    return (i.type,)


@rule(ast.CoopStore, spmd=True)
def _store(ctx: Context, i: ast.CoopStore):
    _position(ctx, i, coopmatrix(ctx, i.value).component)
    return ()


@rule(ast.CoopAtomicUpdate, spmd=True)
def _atomic_update(ctx: Context, i: ast.CoopAtomicUpdate):
    value = coopmatrix(ctx, i.value)
    _position(ctx, i, value.component)
    ctx.same(i, i.type, value)
    return (i.type,)


@rule(ast.CoopApply, spmd=True)
def _apply(ctx: Context, i: ast.CoopApply):
    ctx.same(i.operand, coopmatrix(ctx, i.operand), i.type, "The input coopmatrix type must match the result type")
    defines = [(i.row, I32), (i.column, I32), (i.element, i.type.component)]
    ctx.check_region(i.body, spmd=True, defines=defines, yields=(i.type.component,))
    return (i.type,)


@rule(ast.CoopConstruct, spmd=True)
def _construct(ctx: Context, i: ast.CoopConstruct):
    ctx.same(i.operand, ctx.type_of(i.operand), i.type.component, "The number's type must match the component type")
    _rows_fit_subgroup(ctx, i, i.type)
    return (i.type,)


def _work_item_index(ctx: Context, i, matrix: CoopMatrixType) -> None:
    length = matrix.rows * matrix.columns // ctx.subgroup_size if ctx.subgroup_size else None
    if i.index < 0 or (length is not None and i.index >= length):
        ctx.fail(i, f"Index {i.index} is outside the work-item vector" + (f" (length {length})" if length else ""))


@rule(ast.CoopExtract, spmd=True)
def _extract(ctx: Context, i: ast.CoopExtract):
    matrix = coopmatrix(ctx, i.operand)
    ctx.same(i, i.type, matrix.component, "The scalar type must match the component type")
    _work_item_index(ctx, i, matrix)
    return (i.type,)


@rule(ast.CoopInsert, spmd=True)
def _insert(ctx: Context, i: ast.CoopInsert):
    ctx.same(i, coopmatrix(ctx, i.matrix), i.type, "The coopmatrix type must match the incoming matrix's")
    ctx.same(i.value, ctx.type_of(i.value), i.type.component, "The scalar type must match the component type")
    _work_item_index(ctx, i, i.type)
    return (i.type,)


@rule(ast.CoopMulAdd, spmd=True)
def _mul_add(ctx: Context, i: ast.CoopMulAdd):
    a, b, c = (coopmatrix(ctx, v) for v in (i.a, i.b, i.c))
    for matrix, use, name in ((a, "matrix_a", "A"), (b, "matrix_b", "B"), (c, "matrix_acc", "C"),
                              (i.type, "matrix_acc", "D")):
        if matrix.use != use:
            ctx.fail(i, f"{name} must have use {use}, got {matrix.use}")
    if a.columns != b.rows:
        ctx.fail(i, f"columns(A) must equal rows(B) ({a.columns} vs {b.rows})")
    if c.shape != (a.rows, b.columns) or i.type.shape != c.shape:
        ctx.fail(i, f"C and D must be {a.rows}x{b.columns} (rows(A) x columns(B))")
    for matrix in (a, c, i.type):
        _rows_fit_subgroup(ctx, i, matrix)
    ab = promote(a.component, b.component)
    if ab is None or not promotable(ab, c.component):
        ctx.fail(i, f"promote({a.component}, {b.component}) must be promotable to {c.component}")
    if c.component.is_complex and not i.type.component.is_complex:
        ctx.fail(i, f"Cast from complex type {c.component} to {i.type.component} is forbidden")
    return (i.type,)


@rule(ast.CoopPrefetch, spmd=True)
def _prefetch(ctx: Context, i: ast.CoopPrefetch):
    _position(ctx, i, None)
    if i.level < 0 or i.rows < 1 or i.columns < 1:
        ctx.fail(i, "The cache level must be non-negative and the region's rows and columns positive")
    return ()


@rule(ast.CoopReduce, spmd=True)
def _reduce(ctx: Context, i: ast.CoopReduce):
    matrix = coopmatrix(ctx, i.operand)
    wanted = (matrix.rows, 1) if i.mode == "row" else (1, matrix.columns)
    if (i.type.component, i.type.use) != (matrix.component, matrix.use) or i.type.shape != wanted:
        ctx.fail(i, f"A {i.mode} reduction of {matrix} returns "
                    f"{CoopMatrixType(matrix.component, *wanted, matrix.use)}")
    if i.op != "add" and matrix.component.is_complex:
        ctx.fail(i, f"reduce_{i.op} does not take complex types")
    _rows_fit_subgroup(ctx, i, matrix)
    return (i.type,)


@rule(ast.CoopScale, spmd=True)
def _scale(ctx: Context, i: ast.CoopScale):
    matrix = coopmatrix(ctx, i.matrix)
    ctx.same(i.scalar, ctx.type_of(i.scalar), matrix.component, "The scalar type must match the component type")
    ctx.same(i, i.type, matrix)
    return (i.type,)

