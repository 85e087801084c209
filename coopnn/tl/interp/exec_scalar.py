"""Interpreting the scalar instructions (and arithmetic on cooperative matrices, component-wise) with SPIR-V's
semantics where numpy's differ: signed division truncates toward zero and its remainder takes the dividend's sign,
shifts are arithmetic, integers wrap."""

from __future__ import annotations

import numpy as np

from coopnn.tl import ast
from coopnn.tl.interp.state import Machine, executes
from coopnn.tl.types import CoopMatrixType, ScalarType


def numpy_type(t) -> np.dtype:
    return (t.component if isinstance(t, CoopMatrixType) else t).numpy


def _divide(a, b, t: ScalarType):
    if not t.is_integer:
        return a / b
    safe = np.where(b == 0, 1, b)
    quotient = a // safe
    quotient = np.where((a % safe != 0) & ((a < 0) != (safe < 0)), quotient + 1, quotient)
    return quotient.astype(a.dtype)


def _remainder(a, b, t: ScalarType):
    if not t.is_integer:
        return np.fmod(a, b)
    safe = np.where(b == 0, 1, b)
    return (a - _divide(a, safe, t) * safe).astype(a.dtype)


BINARY = {
    "add": lambda a, b, t: a + b, "sub": lambda a, b, t: a - b, "mul": lambda a, b, t: a * b, "div": _divide,
    "rem": _remainder, "max": lambda a, b, t: np.maximum(a, b), "min": lambda a, b, t: np.minimum(a, b),
    "shl": lambda a, b, t: np.left_shift(a, b), "shr": lambda a, b, t: np.right_shift(a, b),
    "and": lambda a, b, t: a & b, "or": lambda a, b, t: a | b, "xor": lambda a, b, t: a ^ b,
}


def _component(t) -> ScalarType:
    return t.component if isinstance(t, CoopMatrixType) else t


@executes(ast.Arith)
def _arith(m: Machine, i: ast.Arith):
    a, b = m.values((i.a, i.b))
    with np.errstate(all="ignore"):
        return (np.asarray(BINARY[i.op](a, b, _component(i.type))).astype(numpy_type(i.type)),)


UNARY = {"abs": np.abs, "neg": np.negative, "conj": np.conj, "im": np.imag, "re": np.real,
         "not": lambda a: np.logical_not(a) if a.dtype == bool else np.invert(a)}


@executes(ast.Unary)
def _unary(m: Machine, i: ast.Unary):
    with np.errstate(all="ignore"):
        return (np.asarray(UNARY[i.op](m.value(i.a))).astype(numpy_type(i.type)),)


COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "greater_than": np.greater,
           "greater_than_equal": np.greater_equal, "less_than": np.less, "less_than_equal": np.less_equal}


@executes(ast.Compare)
def _compare(m: Machine, i: ast.Compare):
    return (COMPARE[i.op](*m.values((i.a, i.b))),)


def _exp2(x):
    return np.exp2(x) if not np.iscomplexobj(x) else np.exp(x * np.log(2.0))


MATH = {"cos": np.cos, "sin": np.sin, "exp": np.exp, "exp2": _exp2, "log": np.log, "log2": np.log2}


@executes(ast.Math)
def _math(m: Machine, i: ast.Math):
    operand = m.value(i.operand)
    wide = operand.astype(np.complex128 if np.iscomplexobj(operand) else np.float64)
    with np.errstate(all="ignore"):
        return (MATH[i.op.removeprefix("native_")](wide).astype(i.type.numpy),)


@executes(ast.Cast)
def _cast(m: Machine, i: ast.Cast):
    with np.errstate(all="ignore"):
        return (m.value(i.operand).astype(numpy_type(i.type)),)


@executes(ast.Constant)
def _constant(m: Machine, i: ast.Constant):
    if isinstance(i.type, CoopMatrixType):
        return (np.full((1, i.type.rows, i.type.columns), i.value, i.type.component.numpy),)
    return (np.array([i.value], i.type.numpy),)


def _builtin_value(m: Machine, name: str, axis: str | None):
    axis_index = "xyz".index(axis) if axis else 0
    size = m.subgroup_size
    local = m.lanes.work_item
    per_subgroup_x = m.work_group_size[0] // size
    if name == "group_id":
        return m.group_id[axis_index]
    if name == "num_groups":
        return m.num_groups[axis_index]
    if name == "num_subgroups":
        return (per_subgroup_x, m.work_group_size[1], 1)[axis_index]
    if name == "subgroup_size":
        return size
    if name == "subgroup_local_id":
        return local % size
    if name == "subgroup_linear_id":
        return local // size
    return ((local % m.work_group_size[0]) // size, local // m.work_group_size[0], local * 0)[axis_index]


@executes(ast.Builtin)
def _builtin(m: Machine, i: ast.Builtin):
    return (np.atleast_1d(np.asarray(_builtin_value(m, i.name, i.axis))).astype(i.type.numpy),)


@executes(ast.SubgroupBroadcast)
def _broadcast(m: Machine, i: ast.SubgroupBroadcast):
    value, index = m.values((i.value, i.index))
    grouped = m.subgroups(np.asarray(value), 0)
    chosen = m.subgroups(np.asarray(index).astype(np.int64), 0)[:, 0] % m.subgroup_size
    picked = grouped[np.arange(grouped.shape[0]), chosen]
    return (m.from_subgroups(np.repeat(picked[:, None], m.subgroup_size, axis=1)),)


def _identity(op: str, t: ScalarType):
    if op == "add":
        return 0
    if t.is_integer:
        info = np.iinfo(t.numpy)
        return info.min if op == "max" else info.max
    return -np.inf if op == "max" else np.inf


SCANS = {"add": np.cumsum, "max": np.maximum.accumulate, "min": np.minimum.accumulate}
REDUCTIONS = {"add": np.sum, "max": np.max, "min": np.min}


@executes(ast.SubgroupOp)
def _subgroup_operation(m: Machine, i: ast.SubgroupOp):
    identity = _identity(i.op, i.type)
    grouped = m.subgroups(np.asarray(m.value(i.operand)), identity)
    if i.kind == "reduce":
        result = np.repeat(REDUCTIONS[i.op](grouped, axis=1, keepdims=True), m.subgroup_size, axis=1)
    else:
        result = SCANS[i.op](grouped, axis=1)
        if i.kind == "exclusive_scan":
            result = np.concatenate([np.full_like(result[:, :1], identity), result[:, :-1]], axis=1)
    return (m.from_subgroups(result.astype(i.type.numpy)),)
