"""Parameters by name to and from the flat arrays a training session keeps on the device (`ParameterLayout`: each
layer's weight, row-major, then its bias; a target may pad a layer's block, and the padding holds zeros; a trained grid's table follows the layers)."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from coopnn.shaders.training.layout import ParameterLayout
from coopnn.train.gpu.plan import TrainingPlan


def flatten(layout: ParameterLayout, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """Arrays by parameter name in the flat layout (zero where a target pads, and for parameters not given)."""
    flat = np.zeros(layout.size, np.float32)
    for name, (where, shape) in layout.slices().items():
        if name in arrays:
            block = np.zeros(shape, np.float32)
            array = np.asarray(arrays[name], np.float32)
            block[tuple(slice(0, n) for n in array.shape)] = array
            flat[where] = block.reshape(-1)
    return flat


def unflatten(layout: ParameterLayout, plan: TrainingPlan, flat: np.ndarray) -> dict[str, np.ndarray]:
    """The parameters of `plan`'s layers by name, cut from the flat array `flat` (padding dropped)."""
    sizes = ({p.weight: (p.rows, p.cols) for p in plan.layers} | {p.bias: (p.rows,) for p in plan.layers}
             | {t.name: (t.size,) for t in plan.tables})
    out = {}
    for name, (where, shape) in layout.slices().items():
        block = flat[where].reshape(shape)
        out[name] = np.ascontiguousarray(block[tuple(slice(0, n) for n in sizes[name])])
    return out
