"""Derivatives of the elementwise unary operators for reverse mode on numpy: dy/dx from the input x and the output y.

They are the training kernels' rules (`coopnn.shaders.kernel.derivatives`), evaluated on arrays by
`coopnn.shaders.kernel.eager.NumpyKernel`: one definition serves the GPU training kernels and the numpy backend. The
rules follow the forward semantics of `coopnn.graph.ops`, take its attribute defaults and, at a kink, the derivative
of the branch the forward takes there (relu'(0) = 0, |x|'(0) = 0). They compute in x's dtype, so they serve float32
training and float64 gradient checks. Floor, ceil and sign are constant almost everywhere, so no gradient could
train through them: they have no rule, and training through them is a compile error.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from coopnn.graph.ir import Op
from coopnn.shaders.kernel import derivatives
from coopnn.shaders.kernel.eager import NumpyKernel

DIFFERENTIABLE_UNARY: frozenset[Op] = frozenset(derivatives.DERIVATIVES)


def derivative(op: Op, x: np.ndarray, y: np.ndarray, attrs: Mapping[str, Any]) -> np.ndarray:
    """dy/dx of the unary `op` (with `attrs`) at input `x` with output `y`, in x's dtype and shape."""
    with np.errstate(all="ignore"):  # as in the forward, NaN and inf are data
        slope = derivatives.derivative(NumpyKernel(x.dtype), op, x, y, attrs)
    return np.broadcast_to(slope, x.shape).astype(x.dtype)
