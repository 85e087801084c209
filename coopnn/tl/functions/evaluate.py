"""A model function evaluated on numpy arrays by the tensor-language interpreter: the oracle every fused form of it
(kernel instructions, SPIR-V scalars) is measured against. Each element is one lane; the arguments broadcast."""

from __future__ import annotations

import numpy as np

from coopnn.tl import ast
from coopnn.tl.interp.state import Lanes, Machine
from coopnn.tl.launch import DEFAULT_SUBGROUP_SIZE


def evaluate(function: ast.Function, *arguments: np.ndarray) -> tuple[np.ndarray, ...]:
    """The results of `function` for every element of its (broadcast) float32 arguments, in their shape."""
    arrays = [np.asarray(a, np.float32) for a in arguments]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return tuple(np.zeros(shape, np.float32) for _ in function.results)
    machine = Machine(DEFAULT_SUBGROUP_SIZE, (DEFAULT_SUBGROUP_SIZE, 1), (1, 1, 1))
    machine.lanes = Lanes(count, np.ones(count, bool), np.arange(count))
    defines = {a.value.name: np.broadcast_to(x, shape).reshape(-1) for a, x in zip(function.arguments, arrays)}
    results = machine.run_region(function.body, defines)
    return tuple(np.broadcast_to(r, (count,)).reshape(shape).astype(np.float32) for r in results)
