"""Checker rules of the memory instructions (alloca, load, store, atomics, subview, expand, fuse, size, associated,
lifetime_stop, barrier); views (subview, expand, fuse) compare their declared type with the one the reference's rules
give, where a declared `?` may stand for any known size or stride."""

from __future__ import annotations

import math

from coopnn.tl import ast
from coopnn.tl.check_base import Context, rule
from coopnn.tl.types import BOOL, GroupType, MemrefType, ScalarType


def check_layout(ctx: Context, where, memref: MemrefType) -> None:
    """The reference's stride restrictions: 1 <= S1 and S(i-1) s(i-1) <= S(i) where known."""
    strides, shape = memref.strides, memref.shape
    if strides and strides[0] is not None and strides[0] < 1:
        ctx.error(where, f"Invalid layout of {memref}: the first stride must be at least 1")
    for k in range(1, len(strides)):
        known = None not in (strides[k - 1], shape[k - 1], strides[k])
        if known and strides[k - 1] * shape[k - 1] > strides[k]:
            ctx.error(where, f"Invalid layout of {memref}: stride {k + 1} overlaps mode {k}")


@rule(ast.Alloca, spmd=False)
def _alloca(ctx: Context, i: ast.Alloca):
    if None in i.type.shape:
        ctx.fail(i, "The memref's size must be known at compile time for alloca")
    if i.type.space != "local":
        ctx.fail(i, "alloca returns memrefs of the local address space")
    if not i.type.is_default_layout:
        ctx.fail(i, "alloca returns memrefs of the packed default layout")
    return (i.type,)


def _indices(ctx: Context, i, tensor_type, indices) -> ScalarType | MemrefType:
    """The element (or, for a group, the memref) the index list selects."""
    if isinstance(tensor_type, GroupType):
        if len(indices) != 1:
            ctx.fail(i, f"A group takes a single index, got {len(indices)}")
        ctx.index(indices[0])
        return tensor_type.memref
    if not isinstance(tensor_type, MemrefType):
        ctx.fail(i, f"Operand must have memref or group type, got {tensor_type}")
    if len(indices) != tensor_type.order:
        ctx.fail(i, f"The number of indices ({len(indices)}) must match the memref's order ({tensor_type.order})")
    for index in indices:
        ctx.index(index)
    return tensor_type.element


@rule(ast.Load, ast.AtomicLoad)
def _load(ctx: Context, i: ast.Load | ast.AtomicLoad):
    selected = _indices(ctx, i, ctx.type_of(i.tensor), i.indices)
    if isinstance(i, ast.AtomicLoad) and isinstance(selected, MemrefType):
        ctx.fail(i, "atomic_load loads numbers, not memrefs")
    ctx.same(i, i.type, selected, "Return type must match the element type")
    return (i.type,)


@rule(ast.Store, ast.AtomicStore)
def _store(ctx: Context, i: ast.Store | ast.AtomicStore):
    selected = _indices(ctx, i, ctx.memref(i.tensor), i.indices)
    ctx.same(i.value, ctx.type_of(i.value), selected, "Value type must match the memref's element type")
    return ()


@rule(ast.AtomicUpdate)
def _atomic_update(ctx: Context, i: ast.AtomicUpdate):
    selected = _indices(ctx, i, ctx.memref(i.tensor), i.indices)
    ctx.same(i.value, ctx.type_of(i.value), selected, "Value type must match the memref's element type")
    ctx.same(i, i.type, selected, "Return type must match the element type")
    if i.op != "add" and selected.is_complex:
        ctx.fail(i, f"atomic_{i.op} does not take complex types")
    return (i.type,)


def _view_matches(ctx: Context, i, expected: MemrefType) -> None:
    declared = i.type
    shape_ok = declared.shape == expected.shape
    strides_ok = len(declared.strides) == len(expected.strides) and all(
        d is None or d == e for d, e in zip(declared.strides, expected.strides))
    if declared.element != expected.element or declared.space != expected.space or not shape_ok or not strides_ok:
        ctx.fail(i, f"Result type {declared} does not match the view's type {expected}")


def _offset_or_size(ctx: Context, item) -> int | None:
    if isinstance(item, ast.Value):
        ctx.index(item, "Offset and size")
        return None
    return item


@rule(ast.Subview)
def _subview(ctx: Context, i: ast.Subview):
    memref = ctx.memref(i.tensor)
    if len(i.slices) != memref.order:
        ctx.fail(i, f"The number of indices ({len(i.slices)}) must match the memref's order ({memref.order})")
    shape, strides = [], []
    for item, stride in zip(i.slices, memref.strides):
        _offset_or_size(ctx, item.offset)
        if item.size is None:
            continue
        size = _offset_or_size(ctx, item.size)
        if size == 0:
            continue
        if size is not None and size < 0:
            ctx.fail(i, "Slice sizes must be positive")
        shape.append(size)
        strides.append(stride)
    _view_matches(ctx, i, MemrefType(memref.element, tuple(shape), tuple(strides), memref.space))
    return (i.type,)


@rule(ast.Expand)
def _expand(ctx: Context, i: ast.Expand):
    memref = ctx.memref(i.tensor)
    if not 0 <= i.mode < memref.order:
        ctx.fail(i, f"Mode {i.mode} is out of range for a memref of order {memref.order}")
    sizes = [_offset_or_size(ctx, s) for s in i.shape]
    mode_size, stride = memref.shape[i.mode], memref.strides[i.mode]
    if None not in sizes and mode_size is not None and math.prod(sizes) != mode_size:
        ctx.fail(i, f"The product of the expand shape ({math.prod(sizes)}) must equal the mode size ({mode_size})")
    new_strides = []
    for size in sizes:
        new_strides.append(stride)
        stride = None if stride is None or size is None else stride * size
    shape = memref.shape[:i.mode] + tuple(sizes) + memref.shape[i.mode + 1:]
    strides = memref.strides[:i.mode] + tuple(new_strides) + memref.strides[i.mode + 1:]
    _view_matches(ctx, i, MemrefType(memref.element, shape, strides, memref.space))
    return (i.type,)


@rule(ast.Fuse)
def _fuse(ctx: Context, i: ast.Fuse):
    memref = ctx.memref(i.tensor)
    if not 0 <= i.first < i.last < memref.order:
        ctx.fail(i, f"Fused modes need 0 <= from < to < order ({memref.order}); got [{i.first},{i.last}]")
    shape, strides = memref.shape, memref.strides
    for k in range(i.first, i.last):
        if None not in (strides[k], shape[k], strides[k + 1]) and strides[k] * shape[k] != strides[k + 1]:
            ctx.fail(i, f"Modes {k} and {k + 1} cannot be fused: stride {strides[k + 1]} is not "
                        f"{strides[k]}*{shape[k]}")
    sizes = shape[i.first:i.last + 1]
    fused = None if None in sizes else math.prod(sizes)
    expected = MemrefType(memref.element, shape[:i.first] + (fused,) + shape[i.last + 1:],
                          strides[:i.first + 1] + strides[i.last + 1:], memref.space)
    _view_matches(ctx, i, expected)
    return (i.type,)


@rule(ast.Size)
def _size(ctx: Context, i: ast.Size):
    tensor = ctx.type_of(i.tensor)
    order = 1 if isinstance(tensor, GroupType) else tensor.order if isinstance(tensor, MemrefType) else None
    if order is None:
        ctx.fail(i.tensor, f"size needs a memref or group, got {tensor}")
    if not 0 <= i.mode < order:
        ctx.fail(i, f"Mode {i.mode} is out of range (order {order})")
    return (ScalarType("index"),)


@rule(ast.Associated)
def _associated(ctx: Context, i: ast.Associated):
    if not isinstance(ctx.type_of(i.operand), (MemrefType, GroupType)):
        ctx.fail(i.operand, "associated needs a memref or group")
    return (BOOL,)


@rule(ast.LifetimeStop, spmd=False)
def _lifetime_stop(ctx: Context, i: ast.LifetimeStop):
    ctx.memref(i.operand)
    return ()


@rule(ast.Barrier)
def _barrier(ctx: Context, i: ast.Barrier):
    return ()
