"""Kernel rules evaluated at once on numpy arrays: `NumpyKernel` offers the helpers a rule writes kernel
instructions with (`ops.KernelWriter`) and computes each instruction by its numpy meaning in the instruction table.

This is how the numpy backend gets the activations' derivatives from the kernel's rules (`derivatives.py`) instead of
a second copy. Values are arrays of any shape in one float dtype (float32 in training, float64 in gradient checks);
constants are 0-d arrays of that dtype, broadcast where they are used. A graph activation inside a rule (the erf of
GELU's derivative) is its numpy reference, `coopnn.graph.ops`, as in the numpy forward.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from coopnn.graph import ops
from coopnn.graph.ir import Op
from coopnn.shaders.kernel.ops import KERNEL_OPS
from coopnn.shaders.kernel.program import VecType


class NumpyKernel:
    def __init__(self, dtype: np.dtype):
        self.dtype = np.dtype(dtype)

    def _run(self, op: str, *operands: np.ndarray) -> np.ndarray:
        return KERNEL_OPS[op].numpy(*operands)

    def type_of(self, value: np.ndarray) -> VecType:
        return VecType("bool" if value.dtype == np.bool_ else "f32", value.size)

    def splat(self, value: float, size: int, dtype: str = "f32") -> np.ndarray:
        return np.asarray(value, np.bool_ if dtype == "bool" else self.dtype)

    def unary(self, op: str, x: np.ndarray) -> np.ndarray:
        return self._run(op, x)

    def binary(self, op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self._run(op, a, b)

    def scalar(self, op: str, x: np.ndarray, value: float, *, left: bool = False) -> np.ndarray:
        c = self.splat(value, x.size)
        return self._run(op, c, x) if left else self._run(op, x, c)

    def compare(self, op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self._run(op, a, b)

    def select(self, cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.ndim == 0 and b.ndim == 0:
            # the same choice, as an index into (b, a): np.where mispredicts its way through a random condition at
            # several times the cost, and two constants are what most derivative rules choose between
            return np.stack([b, a]).take(cond.view(np.uint8))
        return self._run("select", cond, a, b)

    def activation(self, op: Op, x: np.ndarray, attrs: Mapping[str, Any]) -> np.ndarray:
        return ops.evaluate(op, [x], attrs)

    def function(self, function, *arguments: np.ndarray) -> tuple:
        """A tensor-language model function run by the tl interpreter, the oracle, in float32 as it computes."""
        from coopnn.tl.functions.evaluate import evaluate  # coopnn.tl reads the kernel level: imported when used

        return tuple(r.astype(self.dtype) for r in evaluate(function, *arguments))
