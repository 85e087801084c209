"""Interpreting the cooperative-matrix instructions: every lane holds its subgroup's whole matrix, the first active
lane of a subgroup writes it to memory.

The work-item vector (cooperative_matrix_extract and _insert; the reference points to a "Coopmatrix layout" section
it does not include) is coopnn's: with subgroup size S and R rows, a work-item holds ceil(R/S) rows of each column;
element v of the work-item with subgroup local id p is row p + S (v mod ceil(R/S)) of column v div ceil(R/S), and
rows past R are padding (extract gives zero, insert drops the value). The compiler uses the same layout.
"""

from __future__ import annotations

import numpy as np

from coopnn.tl import ast
from coopnn.tl.interp.exec_memory import gather
from coopnn.tl.interp.state import Lanes, Machine, executes, lane_array


def _access(m: Machine, i, view, transpose: str, rows: int, columns: int):
    """Per lane, the flat index of each component (rows x columns) and whether it is read or written: the checked
    flag's guard; a component outside the memref that no flag guards is an error."""
    x, y = (np.asarray(m.value(v)).astype(np.int64).reshape(-1, 1, 1) for v in (i.row, i.column))
    r, c = np.arange(rows).reshape(1, -1, 1), np.arange(columns).reshape(1, 1, -1)
    first, second = (x + r, y + c) if transpose == "n" else (x + c, y + r)
    s1, s2 = (np.asarray(n).reshape(-1, 1, 1) for n in view.shape)
    stride1, stride2 = (np.asarray(n).reshape(-1, 1, 1) for n in view.strides)
    inside = (first >= 0) & (first < s1) & (second >= 0) & (second < s2)
    rows_ok = ((x + r) < s1) if transpose == "n" else ((y + r) < s2)
    columns_ok = ((y + c) < s2) if transpose == "n" else ((x + c) < s1)
    guard = {None: np.ones_like(inside), "rows_checked": rows_ok, "cols_checked": columns_ok,
             "both_checked": rows_ok & columns_ok}[i.checked]
    if np.any(m.lanes.active.reshape(-1, 1, 1) & guard & ~inside):
        m.fail(i, "the cooperative matrix reaches outside the memref (a checked flag guards the edges)")
    flat = np.asarray(view.offset).reshape(-1, 1, 1) + first * stride1 + second * stride2
    shape = (m.lanes.count, rows, columns)
    return np.broadcast_to(flat, shape), np.broadcast_to(guard & inside, shape)


@executes(ast.CoopLoad)
def _load(m: Machine, i: ast.CoopLoad):
    view = m.value(i.tensor)
    flat, keep = _access(m, i, view, i.transpose, i.type.rows, i.type.columns)
    values = gather(m, view.buffer, np.where(keep, flat, 0))
    return (np.where(keep, values, 0).astype(i.type.component.numpy),)


def _write(m: Machine, i, update) -> np.ndarray:
    """Applies `update(old, new)` to the components each subgroup's first active lane writes; returns, per lane, the
    values its subgroup fetched."""
    view = m.value(i.tensor)
    matrix = lane_array(np.asarray(m.value(i.value)), m.lanes.count)
    flat, keep = _access(m, i, view, i.transpose, matrix.shape[1], matrix.shape[2])
    fetched = np.zeros_like(matrix)
    size = m.subgroup_size
    for lane in m.representatives():
        targets = flat[lane][keep[lane]]
        old = view.buffer[targets]
        view.buffer[targets] = update(old, matrix[lane][keep[lane]])
        first = lane // size * size
        fetched[first:first + size][:, keep[lane]] = old
    return fetched


@executes(ast.CoopStore)
def _store(m: Machine, i: ast.CoopStore):
    _write(m, i, lambda old, new: new)
    return ()


UPDATES = {"add": lambda old, new: old + new, "max": np.maximum, "min": np.minimum}


@executes(ast.CoopAtomicUpdate)
def _atomic_update(m: Machine, i: ast.CoopAtomicUpdate):
    return (_write(m, i, UPDATES[i.op]),)


@executes(ast.CoopConstruct)
def _construct(m: Machine, i: ast.CoopConstruct):
    scalar = np.asarray(m.value(i.operand)).reshape(-1, 1, 1)
    return (np.broadcast_to(scalar, (scalar.shape[0], i.type.rows, i.type.columns)).astype(i.type.component.numpy),)


def work_item_position(m: Machine, rows: int, index: int):
    """(row per lane, column) of work-item vector element `index` (see the module docstring)."""
    per_column = -(-rows // m.subgroup_size)
    local = m.lanes.work_item % m.subgroup_size
    return local + m.subgroup_size * (index % per_column), index // per_column


@executes(ast.CoopExtract)
def _extract(m: Machine, i: ast.CoopExtract):
    matrix = lane_array(np.asarray(m.value(i.operand)), m.lanes.count)
    row, column = work_item_position(m, matrix.shape[1], i.index)
    inside = row < matrix.shape[1]
    picked = matrix[np.arange(m.lanes.count), np.minimum(row, matrix.shape[1] - 1), column]
    return (np.where(inside, picked, 0).astype(i.type.numpy),)


@executes(ast.CoopInsert)
def _insert(m: Machine, i: ast.CoopInsert):
    matrix = lane_array(np.asarray(m.value(i.matrix)), m.lanes.count).copy()
    value = lane_array(np.asarray(m.value(i.value)), m.lanes.count)
    row, column = work_item_position(m, matrix.shape[1], i.index)
    grouped = m.subgroups(matrix, 0)
    for lane in np.flatnonzero((row < matrix.shape[1]) & m.lanes.active):
        grouped[lane // m.subgroup_size, :, row[lane], column] = value[lane]
    return (m.from_subgroups(grouped).astype(i.type.component.numpy),)


@executes(ast.CoopMulAdd)
def _mul_add(m: Machine, i: ast.CoopMulAdd):
    a, b, c = (np.asarray(v) for v in m.values((i.a, i.b, i.c)))
    wide = np.complex128 if any(x.dtype.kind == "c" for x in (a, b, c)) else np.float64
    product = np.matmul(a.astype(wide), b.astype(wide)) + c.astype(wide)
    with np.errstate(all="ignore"):
        return (product.astype(i.type.component.numpy),)


@executes(ast.CoopScale)
def _scale(m: Machine, i: ast.CoopScale):
    scalar, matrix = (np.asarray(v) for v in m.values((i.scalar, i.matrix)))
    return ((scalar.reshape(-1, 1, 1) * matrix).astype(i.type.component.numpy),)


REDUCE = {"add": np.sum, "max": np.max, "min": np.min}


@executes(ast.CoopReduce)
def _reduce(m: Machine, i: ast.CoopReduce):
    matrix = np.asarray(m.value(i.operand))
    axis = 2 if i.mode == "row" else 1
    return (REDUCE[i.op](matrix, axis=axis, keepdims=True).astype(i.type.component.numpy),)


@executes(ast.CoopApply)
def _apply(m: Machine, i: ast.CoopApply):
    matrix = lane_array(np.asarray(m.value(i.operand)), m.lanes.count)
    lanes, rows, columns = matrix.shape
    count = lanes * rows * columns
    row = np.broadcast_to(np.arange(rows).reshape(1, -1, 1), matrix.shape).reshape(-1).astype(np.int32)
    column = np.broadcast_to(np.arange(columns).reshape(1, 1, -1), matrix.shape).reshape(-1).astype(np.int32)
    active = np.repeat(m.lanes.active, rows * columns)
    work_item = np.repeat(m.lanes.work_item, rows * columns)
    defines = {i.row.name: row, i.column.name: column, i.element.name: matrix.reshape(-1)}
    (result,) = m.run_region(i.body, defines, lanes=Lanes(count, active, work_item))
    return (np.broadcast_to(result, (count,)).reshape(matrix.shape).astype(i.type.component.numpy),)
