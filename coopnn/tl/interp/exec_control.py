"""Interpreting the instructions with regions: SPMD regions (parallel, foreach, foreach_tile) get lanes of their own;
`if` and `for` run their regions under a mask where lanes diverge, merging the values they yield lane by lane."""

from __future__ import annotations

import numpy as np

from coopnn.tl import ast
from coopnn.tl.interp.state import Lanes, Machine, executes


def _uniform_int(m: Machine, i, value: ast.Value) -> int:
    found = np.ravel(m.value(value))
    if found.size != 1:
        m.fail(i, f"%{value.name} must be uniform here")
    return int(found[0])


def _work_group_lanes(m: Machine, count: int) -> Lanes:
    work_items = m.work_group_size[0] * m.work_group_size[1]
    return Lanes(count, np.ones(count, bool), np.arange(count, dtype=np.int64) % work_items)


@executes(ast.Parallel)
def _parallel(m: Machine, i: ast.Parallel):
    m.run_region(i.body, lanes=_work_group_lanes(m, m.work_group_size[0] * m.work_group_size[1]))
    return ()


def _trip_grid(sizes: list[int]) -> list[np.ndarray]:
    """Per lane, the position along each mode of the iteration space, the first mode fastest."""
    total = int(np.prod(sizes)) if sizes else 1
    linear = np.arange(total, dtype=np.int64)
    positions = []
    for size in sizes:
        positions.append(linear % size)
        linear = linear // size
    return positions


@executes(ast.Foreach)
def _foreach(m: Machine, i: ast.Foreach):
    starts = [_uniform_int(m, i, v) for v in i.starts]
    stops = [_uniform_int(m, i, v) for v in i.stops]
    sizes = [max(b - a, 0) for a, b in zip(starts, stops)]
    if 0 in sizes:
        return ()
    positions = _trip_grid(sizes)
    types = [m.value(v).dtype for v in i.starts]
    defines = {v.name: (p + a).astype(t) for v, p, a, t in zip(i.variables, positions, starts, types)}
    m.run_region(i.body, defines, lanes=_work_group_lanes(m, int(np.prod(sizes))))
    return ()


@executes(ast.ForeachTile)
def _foreach_tile(m: Machine, i: ast.ForeachTile):
    starts = [_uniform_int(m, i, v) for v in i.starts]
    stops = [_uniform_int(m, i, v) for v in i.stops]
    counts = [max(-(-(b - a) // t), 0) for a, b, t in zip(starts, stops, i.tile_shape)]
    if 0 in counts:
        return ()
    tiles = _trip_grid(counts)
    size = m.subgroup_size
    defines = {}
    for k, (variable, extent) in enumerate(zip(i.variables, i.sizes)):
        offset = np.repeat(starts[k] + tiles[k] * i.tile_shape[k], size)
        dtype = m.value(i.starts[k]).dtype
        defines[variable.name] = offset.astype(dtype)
        defines[extent.name] = np.minimum(i.tile_shape[k], stops[k] - offset).astype(dtype)
    m.run_region(i.body, defines, lanes=_work_group_lanes(m, int(np.prod(counts)) * size))
    return ()


def _merge(condition: np.ndarray, then_values, else_values) -> tuple:
    merged = []
    for a, b in zip(then_values, else_values):
        shape = (-1,) + (1,) * (max(np.ndim(a), np.ndim(b)) - 1)
        merged.append(np.where(condition.reshape(shape), a, b))
    return tuple(merged)


@executes(ast.If)
def _if(m: Machine, i: ast.If):
    condition = np.asarray(m.value(i.condition))
    active = m.lanes.active & condition
    inactive = m.lanes.active & ~condition
    then_values = m.run_region(i.then, lanes=m.with_active(active)) if active.any() or i.types else None
    else_values = None
    if i.otherwise is not None and (inactive.any() or i.types):
        else_values = m.run_region(i.otherwise, lanes=m.with_active(inactive))
    if not i.types:
        return ()
    return _merge(np.broadcast_to(condition, m.lanes.active.shape), then_values, else_values)


@executes(ast.For)
def _for(m: Machine, i: ast.For):
    counter = np.asarray(m.value(i.start))
    stop = np.asarray(m.value(i.stop))
    step = np.asarray(m.value(i.step)) if i.step is not None else np.ones_like(counter)
    carried = tuple(m.values(i.initial))
    while True:
        running = m.lanes.active & (counter < stop)
        if not running.any():
            return carried
        defines = {i.variable.name: counter, **{c.name: v for c, v in zip(i.carried, carried)}}
        yielded = m.run_region(i.body, defines, lanes=m.with_active(running))
        if i.carried:
            carried = _merge(np.broadcast_to(running, m.lanes.active.shape), yielded, carried)
        counter = np.where(running, counter + step, counter).astype(counter.dtype)
