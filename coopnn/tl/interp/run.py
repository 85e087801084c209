"""`interpret(program, *args)`: runs a checked function on numpy arguments, work-group after work-group, and copies
what it wrote back into the caller's arrays (see coopnn/tl/arguments.py for how arguments bind)."""

from __future__ import annotations

import itertools

import numpy as np

from coopnn.tl import ast
from coopnn.tl.arguments import BoundGroup, BoundMemref, bind_arguments
from coopnn.tl.checker import checked
# each module registers its executors
from coopnn.tl.interp import exec_collectives, exec_control, exec_coopmatrix, exec_memory, exec_scalar  # noqa: F401
from coopnn.tl.interp.state import GroupValue, Machine, View
from coopnn.tl.launch import launch_for



def _i64(values) -> tuple[np.ndarray, ...]:
    return tuple(np.array([v], np.int64) for v in values)


def _value(bound):
    if isinstance(bound, BoundMemref):
        return View(bound.buffer, np.array([bound.offset], np.int64), _i64(bound.shape), _i64(bound.strides))
    if isinstance(bound, BoundGroup):
        members = bound.members
        return GroupValue(bound.buffer, np.array([m.offset for m in members], np.int64),
                          np.array([m.shape for m in members], np.int64).reshape(len(members), -1),
                          np.array([m.strides for m in members], np.int64).reshape(len(members), -1))
    return np.atleast_1d(bound)


def interpret(program: ast.Program | ast.Function, *args, groups=(1, 1, 1), subgroup_size: int | None = None,
              function: str | None = None) -> None:
    """Runs `function` (the only one by default) over the grid `groups`; memref arguments are numpy arrays (their
    results written back), group arguments sequences of them, scalars numbers."""
    target = program if isinstance(program, ast.Function) else checked(program).function(function)
    launch = launch_for(target, subgroup_size, groups)
    bound = bind_arguments(target, args)
    machine = Machine(launch.subgroup_size, launch.work_group_size, launch.num_groups)
    arguments = {a.value.name: _value(b) for a, b in zip(target.arguments, bound)}
    for z, y, x in itertools.product(*(range(n) for n in reversed(launch.num_groups))):
        machine.group_id = (x, y, z)
        machine.run_region(target.body, arguments)
    for item in bound:
        if isinstance(item, (BoundMemref, BoundGroup)):
            item.copy_back()
