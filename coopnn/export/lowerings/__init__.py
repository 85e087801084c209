"""How the input stage's graph nodes become scalar statements: one module per family of operators in this package,
each defining `LOWERINGS` (operator -> lowering), found here. An encoding node (a grid, spherical harmonics) is one
more module; nothing else lists them.

A lowering takes the node, its operands as expression arrays (`coopnn.export.scalar`: batched values with a leading
axis of 1, constants as literals of their own shape) and the program, and returns the arrays of its outputs.
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping, Sequence

import numpy as np

from coopnn.export.scalar import ScalarProgram
from coopnn.graph.ir import Node, Op
from coopnn.registry import package_tables

Lowering = Callable[[Node, Sequence[np.ndarray], ScalarProgram], list[np.ndarray]]


@functools.cache
def lowerings() -> Mapping[Op, Lowering]:
    return package_tables(__name__, "LOWERINGS",
                          lambda module, twice: f"{module} lowers {sorted(o.value for o in twice)} again")
