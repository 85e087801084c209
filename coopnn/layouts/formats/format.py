"""What a weight format is: the one record (`WeightFormat`) that says how weights are stored, read and emulated.

Every step after `weights=` is resolved (`coopnn.layouts.formats.weight_format`) takes this record, never the name:
packing encodes with it, shaders read `bits`-wide elements with its `shader_features`, the cooperative-vector driver
converts its `component_type`, and the numpy oracle rounds with `emulate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class WeightFormat:
    name: str  # what `weights=` and the manifest entries of a weight image (`layouts.pack.Entry.dtype`) call it
    label: str  # how messages name its numbers ("float16")
    description: str
    storage: np.dtype  # the numpy type of one stored element
    bits: int  # the width of one stored element, as shaders read it
    component_type: str  # VkComponentTypeKHR name of one element, as cooperative vectors interpret and convert it
    shader_features: frozenset[str]  # Vulkan features a shader needs to read and widen elements of this format
    encode: Callable[[np.ndarray], np.ndarray]  # float32 weights -> stored elements: the packing rule
    decode: Callable[[np.ndarray], np.ndarray]  # stored elements -> the float32 values they hold

    def emulate(self, weights: np.ndarray) -> np.ndarray:
        """float32 weights rounded to the values the format stores, as float32: the numpy oracle of packed weights,
        equal to them by construction."""
        return self.decode(self.encode(weights))


def float_format(name: str, label: str, description: str, dtype, component_type: str,
                 shader_features: frozenset[str] = frozenset()) -> WeightFormat:
    """A format storing each weight as the numpy float type `dtype`: rounded to nearest even, beyond its range to
    infinity (as the GPU's conversions round)."""
    storage = np.dtype(dtype)

    def encode(weights: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.asarray(weights, np.float32).astype(storage)

    def decode(stored: np.ndarray) -> np.ndarray:
        return np.asarray(stored, storage).astype(np.float32)

    return WeightFormat(name, label, description, storage, storage.itemsize * 8, component_type,
                        frozenset(shader_features), encode, decode)
