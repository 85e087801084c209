"""Emitting the cooperative-matrix instructions portably, without cooperative-matrix extensions: each invocation
holds its work-item vector as separate values, in the layout the interpreter documents (exec_coopmatrix.py): with
subgroup size S and R rows, element v of the invocation with subgroup local id p is row p + S (v mod ceil(R/S)) of
column v div ceil(R/S). mul_add broadcasts B's rows across the subgroup; column reductions reduce across it."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.codegen.emit_memory import atomic_load_element, atomic_store_element, atomic_update
from coopnn.tl.codegen.emit_scalar import binary, convert, work_item_length
from coopnn.tl.codegen.emitter import CoopValue, Emitter, MemrefValue, Typed, emits
from coopnn.tl.codegen.types import constant
from coopnn.tl.types import I32, CoopMatrixType, ScalarType
from coopnn.shaders.spirv.ops import Ops


def _per_column(e: Emitter, rows: int) -> int:
    return -(-rows // e.launch.subgroup_size)


def _local_id(e: Emitter):
    return e.widen(e.builtin("SubgroupLocalInvocationId"))


def _position(e: Emitter, t: CoopMatrixType, v: int, local):
    """(row as an i64 id, column as an int) of work-item vector element v."""
    per_column = _per_column(e, t.rows)
    row = e.fn.ops.int_add(e.i64, local, e.index(e.launch.subgroup_size * (v % per_column)))
    return row, v // per_column


def _inside(e: Emitter, t: CoopMatrixType, v: int):
    """Whether element v is a row of the matrix rather than padding (None: always), compared on the 32-bit local id
    (lavapipe's LLVM 15 miscompiled the same test on 64-bit values)."""
    size = e.launch.subgroup_size
    if t.rows % size == 0:
        return None
    first_row = size * (v % _per_column(e, t.rows))
    return e.fn.ops.uint_less(e.bool, e.builtin("SubgroupLocalInvocationId"), e.word(max(t.rows - first_row, 0)))


def _and(e: Emitter, conditions):
    result = None
    for condition in conditions:
        result = condition if result is None else e.fn.ops.logical_and(e.bool, result, condition)
    return result


def _less(e: Emitter, a, b):
    return e.fn.ops.int_less(e.bool, a, b)


def _addresses(e: Emitter, i, memref: MemrefValue, t: CoopMatrixType):
    """Per element: its flat index and the condition under which it is read or written (None: always)."""
    x, y = e.value(i.row).id, e.value(i.column).id
    local = _local_id(e)
    found = []
    for v in range(work_item_length(e, t)):
        row, column = _position(e, t, v, local)
        column_id = e.index(column)
        if i.transpose == "n":
            first, second = e.fn.ops.int_add(e.i64, x, row), e.fn.ops.int_add(e.i64, y, column_id)
            rows_ok, columns_ok = _less(e, first, memref.shape[0]), _less(e, second, memref.shape[1])
        else:
            first, second = e.fn.ops.int_add(e.i64, x, column_id), e.fn.ops.int_add(e.i64, y, row)
            rows_ok, columns_ok = _less(e, second, memref.shape[1]), _less(e, first, memref.shape[0])
        inside = _inside(e, t, v)
        conditions = [] if inside is None else [inside]
        conditions += {None: [], "rows_checked": [rows_ok], "cols_checked": [columns_ok],
                       "both_checked": [rows_ok, columns_ok]}[i.checked]
        found.append((e.flat_index(memref, [first, second]), _and(e, conditions)))
    return found


def _guarded_load(e: Emitter, i, memref: MemrefValue, flat, condition, component: ScalarType):
    def load(at):
        return e.load_element(memref, at) if i.atomic is None else atomic_load_element(e, memref, at, i.atomic, i)

    if condition is None:
        return load(flat)
    loaded = load(e.fn.ops.select(e.i64, condition, flat, memref.offset))
    return e.fn.ops.select(e.value_type(component), condition, loaded, constant(e.m, component, 0))


@emits(ast.CoopLoad)
def _load(e: Emitter, i: ast.CoopLoad):
    memref = e.value(i.tensor)
    elements = tuple(_guarded_load(e, i, memref, flat, condition, i.type.component)
                     for flat, condition in _addresses(e, i, memref, i.type))
    return (CoopValue(i.type, elements),)


def _guarded(e: Emitter, condition, write) -> None:
    if condition is None:
        write()
        return
    with e.fn.if_(condition):
        write()


@emits(ast.CoopStore)
def _store(e: Emitter, i: ast.CoopStore):
    memref, matrix = e.value(i.tensor), e.value(i.value)
    component = matrix.type.component

    def write(flat, value):
        if i.atomic is None:
            e.store_element(memref, flat, value)
        else:
            atomic_store_element(e, memref, flat, Typed(value, component), i.atomic, i)

    for (flat, condition), value in zip(_addresses(e, i, memref, matrix.type), matrix.elements):
        _guarded(e, condition, lambda flat=flat, value=value: write(flat, value))
    return ()


@emits(ast.CoopAtomicUpdate)
def _atomic_update(e: Emitter, i: ast.CoopAtomicUpdate):
    memref, matrix = e.value(i.tensor), e.value(i.value)
    component = matrix.type.component
    if component.component().size < 4:
        e.fail(i, f"atomics on {component} are not supported by the SPIR-V compiler (32- and 64-bit types are)")
    fetched = []
    for (flat, condition), value in zip(_addresses(e, i, memref, matrix.type), matrix.elements):
        held = e.fn.variable(e.value_type(component))
        e.fn.ops.store(held, constant(e.m, component, 0))

        def update(flat=flat, value=value, held=held):
            old = atomic_update(e, i.op, memref, flat, Typed(value, component), i.atomic)
            e.fn.ops.store(held, old.id)

        _guarded(e, condition, update)
        fetched.append(e.fn.ops.load(e.value_type(component), held))
    return (CoopValue(i.type, tuple(fetched)),)


@emits(ast.CoopConstruct)
def _construct(e: Emitter, i: ast.CoopConstruct):
    return (CoopValue(i.type, (e.value(i.operand).id,) * work_item_length(e, i.type)),)


def _in_work_item_vector(e: Emitter, i: ast.CoopExtract | ast.CoopInsert, matrix: CoopValue) -> CoopValue:
    """`matrix`, once `i`'s index is known to lie in the elements each invocation holds."""
    if i.index >= len(matrix.elements):
        e.fail(i, f"index {i.index} is outside the work-item vector ({len(matrix.elements)} elements with subgroup "
                  f"size {e.launch.subgroup_size})")
    return matrix


@emits(ast.CoopExtract)
def _extract(e: Emitter, i: ast.CoopExtract):
    matrix = _in_work_item_vector(e, i, e.value(i.operand))
    return (Typed(matrix.elements[i.index], i.type),)


@emits(ast.CoopInsert)
def _insert(e: Emitter, i: ast.CoopInsert):
    matrix = _in_work_item_vector(e, i, e.value(i.matrix))
    elements = list(matrix.elements)
    elements[i.index] = e.value(i.value).id
    return (CoopValue(i.type, tuple(elements)),)


@emits(ast.CoopScale)
def _scale(e: Emitter, i: ast.CoopScale):
    scalar, matrix = e.value(i.scalar), e.value(i.matrix)
    t = matrix.type.component
    return (CoopValue(i.type, tuple(binary(e, "mul", t, scalar.id, x) for x in matrix.elements)),)


@emits(ast.CoopMulAdd)
def _mul_add(e: Emitter, i: ast.CoopMulAdd):
    a, b, c = e.value(i.a), e.value(i.b), e.value(i.c)
    t = c.type.component
    size = e.launch.subgroup_size
    scope = e.m.enum_constant("Scope", "Subgroup")
    a_rows, b_rows = _per_column(e, a.type.rows), _per_column(e, b.type.rows)
    wide = lambda value, source: convert(e, Typed(value, source), t)  # noqa: E731
    broadcast = {}
    for k in range(b.type.rows):
        for j in range(b.type.columns):
            mine = b.elements[k // size + b_rows * j]
            broadcast[k, j] = wide(e.fn.ops.group_broadcast(e.value_type(b.type.component), scope,
                                                            mine, e.word(k % size)), b.type.component)
    elements = []
    for j in range(c.type.columns):
        for r in range(a_rows):
            total = c.elements[r + a_rows * j]
            for k in range(a.type.columns):
                product = binary(e, "mul", t, wide(a.elements[r + a_rows * k], a.type.component), broadcast[k, j])
                total = binary(e, "add", t, total, product)
            elements.append(total)  # element r + a_rows j: the layout's order
    return (CoopValue(i.type, tuple(convert(e, Typed(x, t), i.type.component) for x in elements)),)


def _identity(e: Emitter, op: str, t: ScalarType):
    if op == "add":
        return constant(e.m, t, 0)
    if t.is_integer:
        bits = 8 * t.size
        return constant(e.m, t, -(2 ** (bits - 1)) if op == "max" else 2 ** (bits - 1) - 1)
    return constant(e.m, t, float("-inf") if op == "max" else float("inf"))


GROUP_REDUCE = {("add", False): Ops.group_int_add, ("add", True): Ops.group_float_add,
                ("max", False): Ops.group_int_max, ("max", True): Ops.group_float_max,
                ("min", False): Ops.group_int_min, ("min", True): Ops.group_float_min}


@emits(ast.CoopReduce)
def _reduce(e: Emitter, i: ast.CoopReduce):
    matrix = e.value(i.operand)
    t = matrix.type.component
    per_column = _per_column(e, matrix.type.rows)
    if i.mode == "row":
        sums = []
        for r in range(per_column):
            total = matrix.elements[r]
            for j in range(1, matrix.type.columns):
                total = binary(e, i.op, t, total, matrix.elements[r + per_column * j])
            sums.append(total)
        return (CoopValue(i.type, tuple(sums)),)
    identity = _identity(e, i.op, t)
    scope = e.m.enum_constant("Scope", "Subgroup")
    columns = []
    for j in range(matrix.type.columns):
        total = None
        for r in range(per_column):
            value = matrix.elements[r + per_column * j]
            inside = _inside(e, matrix.type, r + per_column * j)
            if inside is not None:
                value = e.fn.ops.select(e.value_type(t), inside, value, identity)
            total = value if total is None else binary(e, i.op, t, total, value)
        reduce = GROUP_REDUCE[(i.op, not t.is_integer)]
        columns.append(reduce(e.fn.ops, e.value_type(t), scope, "Reduce", total))
    return (CoopValue(i.type, tuple(columns)),)


@emits(ast.CoopApply)
def _apply(e: Emitter, i: ast.CoopApply):
    matrix = e.value(i.operand)
    local = _local_id(e)
    elements = []
    for v, value in enumerate(matrix.elements):
        row, column = _position(e, matrix.type, v, local)
        defines = {i.row.name: Typed(e.fn.ops.int_convert(e.value_type(I32), row), I32),
                   i.column.name: Typed(constant(e.m, I32, column), I32),
                   i.element.name: Typed(value, matrix.type.component)}
        (result,) = e.run_region(i.body, defines)
        elements.append(result.id)
    return (CoopValue(i.type, tuple(elements)),)
