"""Interpreting the memory instructions: element accesses (bounds checked: an index outside its mode is an error
naming the instruction, where a GPU would read or write anything), atomics in lane order, views, alloca."""

from __future__ import annotations

import numpy as np

from coopnn.tl import ast
from coopnn.tl.interp.state import GroupValue, Machine, View, executes, lane_array
from coopnn.tl.types import default_strides


def _i64(value) -> np.ndarray:
    return np.atleast_1d(np.asarray(value)).astype(np.int64)


def element_indices(m: Machine, i, view: View, indices) -> np.ndarray:
    """The flat buffer index each lane addresses; fails on an index out of bounds on an active lane."""
    if view.buffer is None:
        m.fail(i, "access to a memref that is not associated")
    flat, active = _i64(view.offset), m.lanes.active
    for k, index in enumerate(indices):
        index = np.broadcast_to(_i64(index), active.shape)
        outside = active & ((index < 0) | (index >= view.shape[k]))
        if np.any(outside):
            size = int(np.broadcast_to(view.shape[k], active.shape)[outside][0])
            m.fail(i, f"index {int(index[outside][0])} is out of bounds for mode {k} (size {size})")
        flat = flat + index * view.strides[k]
    return flat


def gather(m: Machine, buffer: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """buffer[flat] for the active lanes (zero elsewhere, which may point anywhere)."""
    flat = lane_array(flat, m.lanes.count)
    active = np.broadcast_to(m.lanes.active.reshape((-1,) + (1,) * (flat.ndim - 1)), flat.shape)
    return np.where(active, buffer[np.where(active, flat, 0)], np.zeros((), buffer.dtype))


def scatter(m: Machine, buffer: np.ndarray, flat: np.ndarray, values: np.ndarray) -> None:
    """buffer[flat] = values for the active lanes, in lane order."""
    flat = lane_array(flat, m.lanes.count)
    values = np.broadcast_to(np.asarray(values, buffer.dtype), flat.shape)
    active = m.lanes.active
    buffer[flat[active]] = values[active]


def _group_member(group: GroupValue, index) -> View:
    index = _i64(index)
    shape = tuple(group.shapes[index, k] for k in range(group.shapes.shape[1]))
    strides = tuple(group.strides[index, k] for k in range(group.strides.shape[1]))
    return View(group.buffer, group.offsets[index], shape, strides)


@executes(ast.Load)
def _load(m: Machine, i: ast.Load):
    tensor = m.value(i.tensor)
    if isinstance(tensor, GroupValue):
        index = _i64(m.value(i.indices[0]))
        if np.any((index < 0) | (index >= len(tensor.offsets))):
            m.fail(i, f"group index out of bounds (the group holds {len(tensor.offsets)} memrefs)")
        return (_group_member(tensor, index),)
    return (gather(m, tensor.buffer, element_indices(m, i, tensor, m.values(i.indices))),)


@executes(ast.Store)
def _store(m: Machine, i: ast.Store):
    tensor = m.value(i.tensor)
    scatter(m, tensor.buffer, element_indices(m, i, tensor, m.values(i.indices)), m.value(i.value))
    return ()


@executes(ast.AtomicLoad)
def _atomic_load(m: Machine, i: ast.AtomicLoad):
    return _load(m, i)


@executes(ast.AtomicStore)
def _atomic_store(m: Machine, i: ast.AtomicStore):
    return _store(m, i)


UPDATES = {"add": lambda old, v: old + v, "max": np.maximum, "min": np.minimum}


@executes(ast.AtomicUpdate)
def _atomic_update(m: Machine, i: ast.AtomicUpdate):
    tensor = m.value(i.tensor)
    flat = lane_array(element_indices(m, i, tensor, m.values(i.indices)), m.lanes.count)
    values = lane_array(np.asarray(m.value(i.value), tensor.buffer.dtype), m.lanes.count)
    fetched = np.zeros(m.lanes.count, tensor.buffer.dtype)
    for lane in np.flatnonzero(m.lanes.active):
        fetched[lane] = tensor.buffer[flat[lane]]
        tensor.buffer[flat[lane]] = UPDATES[i.op](fetched[lane], values[lane])
    return (fetched,)


@executes(ast.Alloca)
def _alloca(m: Machine, i: ast.Alloca):
    size = int(np.prod(i.type.shape, dtype=np.int64)) if i.type.shape else 1
    strides = default_strides(i.type.shape)
    return (View(np.zeros(size, i.type.element.numpy), _i64(0), tuple(_i64(s) for s in i.type.shape),
                 tuple(_i64(s) for s in strides)),)


def _static_or_value(m: Machine, item) -> np.ndarray:
    return _i64(m.value(item)) if isinstance(item, ast.Value) else _i64(item)


@executes(ast.Subview)
def _subview(m: Machine, i: ast.Subview):
    tensor = m.value(i.tensor)
    offset, shape, strides = _i64(tensor.offset), [], []
    for k, piece in enumerate(i.slices):
        offset = offset + _static_or_value(m, piece.offset) * tensor.strides[k]
        if piece.size is None:
            continue
        size = _static_or_value(m, piece.size)
        if isinstance(piece.size, int) and piece.size == 0:
            continue
        shape.append(size)
        strides.append(tensor.strides[k])
    return (View(tensor.buffer, offset, tuple(shape), tuple(strides)),)


@executes(ast.Expand)
def _expand(m: Machine, i: ast.Expand):
    tensor = m.value(i.tensor)
    sizes = [_static_or_value(m, s) for s in i.shape]
    stride, strides = tensor.strides[i.mode], []
    for size in sizes:
        strides.append(stride)
        stride = stride * size
    shape = tensor.shape[:i.mode] + tuple(sizes) + tensor.shape[i.mode + 1:]
    return (View(tensor.buffer, tensor.offset, shape,
                 tensor.strides[:i.mode] + tuple(strides) + tensor.strides[i.mode + 1:]),)


@executes(ast.Fuse)
def _fuse(m: Machine, i: ast.Fuse):
    tensor = m.value(i.tensor)
    fused = np.prod(np.stack(np.broadcast_arrays(*tensor.shape[i.first:i.last + 1])), axis=0)
    shape = tensor.shape[:i.first] + (fused,) + tensor.shape[i.last + 1:]
    strides = tensor.strides[:i.first + 1] + tensor.strides[i.last + 1:]
    return (View(tensor.buffer, tensor.offset, shape, strides),)


@executes(ast.Size)
def _size(m: Machine, i: ast.Size):
    tensor = m.value(i.tensor)
    if isinstance(tensor, GroupValue):
        return (_i64(len(tensor.offsets)),)
    return (_i64(tensor.shape[i.mode]),)


@executes(ast.Associated)
def _associated(m: Machine, i: ast.Associated):
    tensor = m.value(i.operand)
    return (np.array([tensor.buffer is not None]),)


@executes(ast.LifetimeStop, ast.Barrier, ast.CoopPrefetch)
def _no_effect(m: Machine, i):
    """Lanes run in lockstep, so barriers order nothing more; prefetches and lifetime ends are hints."""
    return ()
