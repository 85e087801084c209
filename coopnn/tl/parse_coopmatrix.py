"""Readers of the cooperative-matrix instructions (cooperative_matrix_*)."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.parse_base import TRANSPOSES, Opcode, bracketed_integer, finish, fixed_operands, reads, region
from coopnn.tl.parse_types import coopmatrix_type, number_type
from coopnn.tl.scanner import Scanner

CHECKED_FLAGS = ("rows_checked", "cols_checked", "both_checked")
UPDATES = {"cooperative_matrix_atomic_add": "add", "cooperative_matrix_atomic_max": "max",
           "cooperative_matrix_atomic_min": "min"}
REDUCTIONS = {"cooperative_matrix_reduce_add": "add", "cooperative_matrix_reduce_max": "max",
              "cooperative_matrix_reduce_min": "min"}


def _position(s: Scanner):
    tensor = s.local()
    s.expect("[")
    row, column = fixed_operands(s, 2)
    s.expect("]")
    return tensor, row, column


def _flags(op: Opcode, atomic: bool):
    transpose = op.take(TRANSPOSES) or "n"
    checked = op.take(CHECKED_FLAGS)
    return transpose, checked, (op.take_atomic() if atomic else None)


@reads("cooperative_matrix_load", "cooperative_matrix_atomic_load")
def _load(op: Opcode, s: Scanner):
    op.results_count(1)
    transpose, checked, atomic = _flags(op, op.name == "cooperative_matrix_atomic_load")
    tensor, row, column = _position(s)
    s.expect(":")
    return finish(op, ast.CoopLoad, transpose=transpose, checked=checked, atomic=atomic, tensor=tensor, row=row,
                  column=column, type=coopmatrix_type(s))


@reads("cooperative_matrix_store", "cooperative_matrix_atomic_store")
def _store(op: Opcode, s: Scanner):
    op.results_count(0)
    transpose, checked, atomic = _flags(op, op.name == "cooperative_matrix_atomic_store")
    value = s.local()
    s.expect(",")
    tensor, row, column = _position(s)
    return finish(op, ast.CoopStore, transpose=transpose, checked=checked, atomic=atomic, value=value, tensor=tensor,
                  row=row, column=column)


@reads(*UPDATES)
def _update(op: Opcode, s: Scanner):
    op.results_count(1)
    transpose, checked, atomic = _flags(op, True)
    value = s.local()
    s.expect(",")
    tensor, row, column = _position(s)
    s.expect(":")
    return finish(op, ast.CoopAtomicUpdate, op=UPDATES[op.name], transpose=transpose, checked=checked, atomic=atomic,
                  value=value, tensor=tensor, row=row, column=column, type=coopmatrix_type(s))


@reads("cooperative_matrix_apply")
def _apply(op: Opcode, s: Scanner):
    op.results_count(1)
    s.expect("(")
    row, column, element = fixed_operands(s, 3)
    s.expect(")")
    s.expect("=")
    operand = s.local()
    s.expect("->")
    matrix = coopmatrix_type(s)
    return finish(op, ast.CoopApply, row=row, column=column, element=element, operand=operand, type=matrix,
                  body=region(s, op.fresh))


@reads("cooperative_matrix_construct")
def _construct(op: Opcode, s: Scanner):
    op.results_count(1)
    operand = s.local()
    s.expect(":")
    return finish(op, ast.CoopConstruct, operand=operand, type=coopmatrix_type(s))


@reads("cooperative_matrix_extract")
def _extract(op: Opcode, s: Scanner):
    op.results_count(1)
    operand = s.local()
    index = bracketed_integer(s, "the work-item vector index")
    s.expect(":")
    return finish(op, ast.CoopExtract, operand=operand, index=index, type=number_type(s))


@reads("cooperative_matrix_insert")
def _insert(op: Opcode, s: Scanner):
    op.results_count(1)
    value, matrix = fixed_operands(s, 2)
    index = bracketed_integer(s, "the work-item vector index")
    s.expect(":")
    return finish(op, ast.CoopInsert, value=value, matrix=matrix, index=index, type=coopmatrix_type(s))


@reads("cooperative_matrix_mul_add")
def _mul_add(op: Opcode, s: Scanner):
    op.results_count(1)
    a, b, c = fixed_operands(s, 3)
    s.expect(":")
    return finish(op, ast.CoopMulAdd, a=a, b=b, c=c, type=coopmatrix_type(s))


@reads("cooperative_matrix_prefetch")
def _prefetch(op: Opcode, s: Scanner):
    op.results_count(0)
    level = s.integer("the cache level")
    s.expect(",")
    tensor, row, column = _position(s)
    s.expect(",")
    rows = s.integer("the rows to fetch")
    s.expect(",")
    columns = s.integer("the columns to fetch")
    return finish(op, ast.CoopPrefetch, level=level, tensor=tensor, row=row, column=column, rows=rows,
                  columns=columns)


@reads(*REDUCTIONS)
def _reduce(op: Opcode, s: Scanner):
    op.results_count(1)
    mode = op.take(("row", "column"))
    if mode is None:
        raise s.error(f"{op.name} needs a mode: .row or .column", op.start)
    operand = s.local()
    s.expect(":")
    return finish(op, ast.CoopReduce, op=REDUCTIONS[op.name], mode=mode, operand=operand, type=coopmatrix_type(s))


@reads("cooperative_matrix_scale")
def _scale(op: Opcode, s: Scanner):
    op.results_count(1)
    scalar, matrix = fixed_operands(s, 2)
    s.expect(":")
    return finish(op, ast.CoopScale, scalar=scalar, matrix=matrix, type=coopmatrix_type(s))
