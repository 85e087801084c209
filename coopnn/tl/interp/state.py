"""The interpreter's machine: values, lanes and regions.

Instructions run in lockstep over lanes. A collective region has one lane (its values are uniform); `parallel` gives
a lane per work-item of the work-group, `foreach` a lane per iteration (iteration k on work-item k mod the
work-group size), `foreach_tile` a subgroup of lanes per tile. Consecutive runs of subgroup-size lanes form the
subgroups that subgroup operations and cooperative matrices work across. A value is a numpy array with the lanes
first: shape (lanes,) for a scalar, (lanes, rows, columns) for a cooperative matrix (every lane of a subgroup holds
the whole matrix), or (1, ...) when it is uniform, which numpy broadcasts. `active` masks the lanes that take part
(divergent `if` and `for`); only active lanes write memory.
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass
from typing import Callable

import numpy as np

from coopnn.errors import InputError
from coopnn.registry import registrar
from coopnn.tl import ast

Executor = Callable[["Machine", ast.Inst], tuple]
EXECUTORS: dict[type, Executor] = {}


executes = registrar(EXECUTORS)


@dataclass
class View:
    """A memref value: a flat buffer and, per lane (or uniformly), where it starts, its shape and its strides."""

    buffer: np.ndarray | None
    offset: np.ndarray
    shape: tuple[np.ndarray, ...]
    strides: tuple[np.ndarray, ...]


@dataclass
class GroupValue:
    """A group value: its memrefs' offsets into one buffer, their shapes and strides (one row per memref)."""

    buffer: np.ndarray
    offsets: np.ndarray
    shapes: np.ndarray
    strides: np.ndarray


@dataclass
class Lanes:
    count: int
    active: np.ndarray  # bool (count,)
    work_item: np.ndarray  # the work-item (linear id in the work-group) each lane runs on


class Machine:
    """Runs one function for one work-group at a time."""

    def __init__(self, subgroup_size: int, work_group_size: tuple[int, int], num_groups: tuple[int, int, int]):
        self.subgroup_size = subgroup_size
        self.work_group_size = work_group_size
        self.num_groups = num_groups
        self.group_id = (0, 0, 0)
        self.env: ChainMap = ChainMap()
        self.lanes = Lanes(1, np.ones(1, bool), np.zeros(1, np.int64))

    def fail(self, inst, message: str):
        raise InputError(f"{inst.span}: {message}" if inst.span is not None else message)

    def value(self, name: ast.Value):
        return self.env[name.name]

    def values(self, names) -> list:
        return [self.env[v.name] for v in names]

    def run_region(self, region: ast.Region, defines: dict | None = None, lanes: Lanes | None = None):
        """Runs `region` in a scope of its own; returns what its closing yield gives (None without one)."""
        saved_env, saved_lanes = self.env, self.lanes
        self.env = self.env.new_child(dict(defines or {}))
        if lanes is not None:
            self.lanes = lanes
        try:
            for inst in region.instructions:
                if isinstance(inst, ast.Yield):
                    return tuple(self.values(inst.values))
                executor = EXECUTORS.get(type(inst))
                if executor is None:
                    self.fail(inst, f"the interpreter does not run {type(inst).__name__} instructions (coopnn's "
                                    f"kernel instructions run as model kernels: coopnn.tl.kernel_text)")
                results = executor(self, inst)
                for name, result in zip(inst.results, results):
                    self.env[name.name] = result
            return None
        finally:
            self.env, self.lanes = saved_env, saved_lanes

    def with_active(self, active: np.ndarray) -> Lanes:
        return Lanes(self.lanes.count, active, self.lanes.work_item)

    def subgroups(self, values: np.ndarray, fill) -> np.ndarray:
        """`values` (lanes first) as (subgroups, subgroup size, ...), inactive and missing lanes set to `fill`."""
        count, size = self.lanes.count, self.subgroup_size
        padded_count = -(-count // size) * size
        full = np.broadcast_to(values, (count,) + values.shape[1:])
        active = np.broadcast_to(self.lanes.active.reshape((-1,) + (1,) * (values.ndim - 1)), full.shape)
        padded = np.full((padded_count,) + values.shape[1:], fill, values.dtype)
        padded[:count] = np.where(active, full, np.asarray(fill, values.dtype))
        return padded.reshape((padded_count // size, size) + values.shape[1:])

    def from_subgroups(self, grouped: np.ndarray) -> np.ndarray:
        """The inverse of `subgroups`: back to one row per lane."""
        return grouped.reshape((-1,) + grouped.shape[2:])[:self.lanes.count]

    def representatives(self) -> np.ndarray:
        """The first active lane of each subgroup: the one that writes a cooperative matrix to memory."""
        active = self.lanes.active
        lanes = np.flatnonzero(active)
        subgroup = lanes // self.subgroup_size
        first = np.concatenate(([True], subgroup[1:] != subgroup[:-1])) if lanes.size else np.zeros(0, bool)
        return lanes[first]


def lane_array(value, count: int) -> np.ndarray:
    """`value` broadcast to one row per lane."""
    value = np.asarray(value)
    return np.broadcast_to(value, (count,) + value.shape[1:]) if value.shape[:1] == (1,) else value
