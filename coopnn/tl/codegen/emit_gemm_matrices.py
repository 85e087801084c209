"""gemm on KHR cooperative matrices, where the device offers a subgroup-scope product of the operands' types
(`Launch.matrix_shapes`) and the operands allow it: static sizes that are multiples of the product's M, N and K,
every memref with unit stride in its first mode (column-major tiles; a transposed operand loads row-major), no
atomic flag. Each subgroup takes output tiles in turn (tile t on subgroup t mod the subgroups), runs the K tiles
through OpCooperativeMatrixMulAddKHR and writes alpha acc + beta C (C unread when beta is 0). Anything else goes
through the loops of emit_collectives.py."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.codegen.emitter import Emitter, MemrefValue, Typed
from coopnn.tl.codegen.types import value_type
from coopnn.tl.launch import MatrixShape
from coopnn.tl.types import ScalarType


FLOAT_RESULTS = ("f16", "f32")  # OpMatrixTimesScalar scales floating matrices only


def _op_shape(memref: MemrefValue, transpose: str) -> tuple[int, int] | None:
    declared = memref.declared
    if declared is None or None in declared.shape or declared.order != 2 or declared.strides[0] != 1:
        return None
    return declared.shape[::-1] if transpose == "t" else declared.shape


def matrix_plan(e: Emitter, i: ast.Collective, operands) -> MatrixShape | None:
    """The device product this gemm runs on, or None for loops."""
    if i.op != "gemm" or i.atomic or not e.launch.matrix_shapes:
        return None
    a, b, c = operands[1], operands[2], operands[4]
    op_a, op_b = _op_shape(a, i.transposes[0]), _op_shape(b, i.transposes[1])
    out = _op_shape(c, "n")
    if None in (op_a, op_b, out):
        return None
    (m, k), (_, n) = op_a, op_b
    types = (a.element.name, b.element.name, c.element.name)
    for shape in e.launch.matrix_shapes:
        if shape.c not in FLOAT_RESULTS:
            continue
        fits = m % shape.m == 0 and n % shape.n == 0 and k % shape.k == 0
        if fits and (shape.a, shape.b, shape.c) == types:
            return shape
    return None


def _tile(e: Emitter, memref: MemrefValue, transpose: str, row, column, matrix_type):
    """Load the tile of op(memref) whose corner is (row, column)."""
    if transpose == "t":
        row, column = column, row
    flat = e.flat_index(memref, [row, column])
    layout = e.m.enum_constant("CooperativeMatrixLayout", "RowMajorKHR" if transpose == "t" else "ColumnMajorKHR")
    return e.fn.ops.matrix_load(matrix_type, e.element_pointer(memref, flat), layout,
                                _stride(e, memref))


def _stride(e: Emitter, memref: MemrefValue):
    """The column stride, in elements (of the buffer's element type, which has the component's width)."""
    return e.fn.ops.uint_convert(e.u32, memref.strides[1])


def emit_gemm_on_matrices(e: Emitter, i: ast.Collective, operands, shape: MatrixShape, alpha: Typed,
                          beta: Typed) -> None:
    """`alpha` and `beta` already converted to C's element type."""
    _, a, b, _, c = operands
    m = e.m
    component = {name: value_type(m, ScalarType(name)) for name in (shape.a, shape.b, shape.c)}
    a_type = m.type_cooperative_matrix_khr(component[shape.a], "Subgroup", shape.m, shape.k, "MatrixAKHR")
    b_type = m.type_cooperative_matrix_khr(component[shape.b], "Subgroup", shape.k, shape.n, "MatrixBKHR")
    c_type = m.type_cooperative_matrix_khr(component[shape.c], "Subgroup", shape.m, shape.n, "MatrixAccumulatorKHR")
    rows, columns = c.declared.shape
    depth = _op_shape(a, i.transposes[0])[1]
    tiles_m, tiles_n = rows // shape.m, columns // shape.n
    subgroups = e.launch.work_items // e.launch.subgroup_size
    zero = e.m.constant(component[shape.c], 0.0)
    e.m.capability("CooperativeMatrixKHR")
    e.features.add("cooperativeMatrix")
    e.extensions.add("VK_KHR_cooperative_matrix")
    with e.fn.for_range(e.widen(e.builtin("SubgroupId")), e.index(tiles_m * tiles_n), e.index(subgroups)) as tile:
        row = e.fn.ops.int_mul(e.i64, e.fn.ops.int_rem(e.i64, tile, e.index(tiles_m)), e.index(shape.m))
        column = e.fn.ops.int_mul(e.i64, e.fn.ops.int_div(e.i64, tile, e.index(tiles_m)), e.index(shape.n))
        total = e.fn.variable(c_type)
        e.fn.ops.store(total, e.fn.ops.construct(c_type, zero))
        with e.fn.for_range(e.index(0), e.index(depth // shape.k)) as step:
            inner = e.fn.ops.int_mul(e.i64, step, e.index(shape.k))
            a_tile = _tile(e, a, i.transposes[0], row, inner, a_type)
            b_tile = _tile(e, b, i.transposes[1], inner, column, b_type)
            product = e.fn.ops.matrix_mul_add(c_type, a_tile, b_tile, e.fn.ops.load(c_type, total))
            e.fn.ops.store(total, product)
        _write(e, c, row, column, c_type, e.fn.ops.load(c_type, total), alpha, beta, zero)
    e.barrier()


def _write(e: Emitter, c: MemrefValue, row, column, c_type, total, alpha: Typed, beta: Typed, zero) -> None:
    scaled = e.fn.ops.matrix_times_scalar(c_type, total, alpha.id)
    pointer = e.element_pointer(c, e.flat_index(c, [row, column]))
    layout = e.m.enum_constant("CooperativeMatrixLayout", "ColumnMajorKHR")
    stride = _stride(e, c)
    with e.fn.if_(e.fn.ops.float_equal(e.bool, beta.id, zero)) as branch:
        e.fn.ops.matrix_store(pointer, scaled, layout, stride)
        branch.else_()
        old = e.fn.ops.matrix_load(c_type, pointer, layout, stride)
        kept = e.fn.ops.matrix_times_scalar(c_type, old, beta.id)
        e.fn.ops.matrix_store(pointer, e.fn.ops.float_add(c_type, scaled, kept), layout, stride)
