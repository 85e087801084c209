"""Readers of the memory instructions (alloca, load, store, the atomics, subview, expand, fuse, size, associated,
lifetime_stop, barrier) and of the collectives (axpby, cumsum, gemm, gemv, ger, hadamard, sum)."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.parse_base import TRANSPOSES, Opcode, bracketed_integer, finish, fixed_operands, index_list, reads
from coopnn.tl.parse_types import dictionary, memref_type, number_type
from coopnn.tl.scanner import Scanner

# Collective -> (transpose modifiers it takes, operands before the integer mode, operands after it).
COLLECTIVES = {"axpby": (1, 4, 0), "cumsum": (0, 2, 2), "gemm": (2, 5, 0), "gemv": (1, 5, 0), "ger": (0, 5, 0),
               "hadamard": (0, 5, 0), "sum": (1, 4, 0)}
ATOMIC_UPDATES = {"atomic_add": "add", "atomic_max": "max", "atomic_min": "min"}


@reads("alloca")
def _alloca(op: Opcode, s: Scanner):
    op.results_count(1)
    attributes = dictionary(s) if s.peek("{") else ast.DictAttr()
    s.expect(":")
    return finish(op, ast.Alloca, attributes=attributes, type=memref_type(s))


@reads("load")
def _load(op: Opcode, s: Scanner):
    op.results_count(1)
    tensor = s.local()
    indices = index_list(op, s)
    s.expect(":")
    loaded = memref_type(s) if s.peek("memref<") else number_type(s)
    return finish(op, ast.Load, tensor=tensor, indices=indices, type=loaded)


@reads("store")
def _store(op: Opcode, s: Scanner):
    op.results_count(0)
    value, tensor = fixed_operands(s, 2)
    return finish(op, ast.Store, value=value, tensor=tensor, indices=index_list(op, s))


@reads("atomic_load")
def _atomic_load(op: Opcode, s: Scanner):
    op.results_count(1)
    atomic = op.take_atomic()
    tensor = s.local()
    indices = index_list(op, s)
    s.expect(":")
    return finish(op, ast.AtomicLoad, atomic=atomic, tensor=tensor, indices=indices, type=number_type(s))


@reads("atomic_store")
def _atomic_store(op: Opcode, s: Scanner):
    op.results_count(0)
    atomic = op.take_atomic()
    value, tensor = fixed_operands(s, 2)
    return finish(op, ast.AtomicStore, atomic=atomic, value=value, tensor=tensor, indices=index_list(op, s))


@reads(*ATOMIC_UPDATES)
def _atomic_update(op: Opcode, s: Scanner):
    op.results_count(1)
    atomic = op.take_atomic()
    value, tensor = fixed_operands(s, 2)
    indices = index_list(op, s)
    s.expect(":")
    return finish(op, ast.AtomicUpdate, op=ATOMIC_UPDATES[op.name], atomic=atomic, value=value, tensor=tensor,
                  indices=indices, type=number_type(s))


def _constant_or_local(s: Scanner) -> int | ast.Value:
    return s.local() if s.peek_local() else s.integer("an integer constant or a local identifier")


def _slice(s: Scanner) -> ast.Slice:
    """`offset` or `offset:size`."""
    offset = _constant_or_local(s)
    return ast.Slice(offset, _constant_or_local(s) if s.eat(":") else None)


@reads("subview")
def _subview(op: Opcode, s: Scanner):
    op.results_count(1)
    tensor = s.local()
    s.expect("[")
    slices = s.items_until("]", lambda: _slice(s), "between subview indices")
    s.expect(":")
    return finish(op, ast.Subview, tensor=tensor, slices=tuple(slices), type=memref_type(s))


@reads("expand")
def _expand(op: Opcode, s: Scanner):
    op.results_count(1)
    tensor = s.local()
    s.expect("[")
    mode = s.integer("the mode to expand")
    s.expect("->")
    shape = [_constant_or_local(s)]
    while s.eat("x"):
        shape.append(_constant_or_local(s))
    if len(shape) < 2:
        raise s.error("an expand shape has at least two modes (AxB)")
    s.expect("]")
    s.expect(":")
    return finish(op, ast.Expand, tensor=tensor, mode=mode, shape=tuple(shape), type=memref_type(s))


@reads("fuse")
def _fuse(op: Opcode, s: Scanner):
    op.results_count(1)
    tensor = s.local()
    s.expect("[")
    first = s.integer("the first mode to fuse")
    s.expect(",")
    last = s.integer("the last mode to fuse")
    s.expect("]")
    s.expect(":")
    return finish(op, ast.Fuse, tensor=tensor, first=first, last=last, type=memref_type(s))


@reads("size")
def _size(op: Opcode, s: Scanner):
    op.results_count(1)
    tensor = s.local()
    mode = bracketed_integer(s, "the mode")
    s.expect(":")
    s.expect_word("index", "(size returns index)")
    return finish(op, ast.Size, tensor=tensor, mode=mode)


@reads("associated")
def _associated(op: Opcode, s: Scanner):
    op.results_count(1)
    tensor = s.local()
    s.expect(":")
    s.expect_word("bool", "(associated returns bool)")
    return finish(op, ast.Associated, operand=tensor)


@reads("lifetime_stop")
def _lifetime_stop(op: Opcode, s: Scanner):
    op.results_count(0)
    return finish(op, ast.LifetimeStop, operand=s.local())


@reads("barrier")
def _barrier(op: Opcode, s: Scanner):
    op.results_count(0)
    fence_global = op.take(("global",)) is not None
    fence_local = op.take(("local",)) is not None
    return finish(op, ast.Barrier, fence_global=fence_global, fence_local=fence_local)


@reads(*COLLECTIVES)
def _collective(op: Opcode, s: Scanner):
    op.results_count(0)
    transposes_taken, before, after = COLLECTIVES[op.name]
    atomic = op.take(("atomic",)) is not None
    transposes = tuple(op.take(TRANSPOSES) or "n" for _ in range(transposes_taken))
    operands = fixed_operands(s, before)
    mode = None
    if after:
        s.expect(",")
        mode = s.integer("the summation mode")
        s.expect(",")
        operands += fixed_operands(s, after)
    return finish(op, ast.Collective, op=op.name, atomic=atomic, transposes=transposes, operands=tuple(operands),
                  mode=mode)
