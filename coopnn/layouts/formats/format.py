"""What a weight format is: the one record (`WeightFormat`) that says how weights are stored, read and emulated.

Every step after `weights=` is resolved (`coopnn.layouts.formats.weight_format`) takes this record, never the name:
packing encodes with it (`stored`), shaders read `bits`-wide elements with its `shader_features`, the
cooperative-vector driver converts its `component_type`, and the numpy oracle rounds with `emulate` (and, for a
format with `row_scales`, follows the float16 arithmetic of `coopnn.layouts.formats.emulation`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from coopnn.errors import CompileError


@dataclass(frozen=True)
class RowScales:
    """Matrices stored as `encode(W / scale[row])` with one float16 scale per output row, applied in float16 after the
    product (`coopnn.layouts.formats.emulation` defines the order). A row's scale is the smallest float16 at which its
    largest |weight| is stored at most `largest` (so nothing in the row saturates); a zero row gets scale 1."""

    largest: float  # the value a row's largest |weight| is stored as (up to the rounding of its float16 scale)
    storage: np.dtype = np.dtype(np.float16)  # how scales are stored: float16, as the product they multiply

    def scales(self, matrix: np.ndarray, what: str = "a matrix") -> np.ndarray:
        """The float16 scale of each row of `matrix` (rows x columns), as float32; CompileError for a weight that is
        not finite (no scale keeps it in range)."""
        matrix = np.asarray(matrix, np.float32)
        if not np.isfinite(matrix).all():
            raise CompileError(f"{what} has weights that are not finite (NaN or infinity), which a scaled 8-bit "
                               f"format cannot store; use weights='fp16' or 'fp32'")
        top = np.abs(matrix).max(axis=1).astype(np.float64) if matrix.size else np.zeros(len(matrix))
        wanted = top / self.largest
        scales = wanted.astype(self.storage)
        low = scales.astype(np.float64) < wanted  # rounded below: the row's largest weight would saturate
        scales[low] = np.nextafter(scales[low], self.storage.type(np.inf))
        scales[top == 0] = 1
        return scales.astype(np.float32)


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
    row_scales: RowScales | None = None  # matrices scaled per output row before encoding; None: stored as they are
    vector_format: WeightFormat | None = None  # how vectors (biases) are stored; None: in this format

    @property
    def vectors(self) -> WeightFormat:
        """The format vectors (biases) are stored in."""
        return self.vector_format or self

    def emulate(self, weights: np.ndarray) -> np.ndarray:
        """float32 weights rounded to the values the format stores, as float32: the numpy oracle of packed weights,
        equal to them by construction."""
        return self.decode(self.encode(weights))

    def stored(self, array: np.ndarray, role: str, what: str = "a matrix") -> tuple[np.ndarray, np.ndarray | None]:
        """The elements a constant of `role` ("matrix" or "vector") is stored as, and its row scales (float32 holding
        float16 values) where the format scales matrices, else None: what packing writes and the oracle reads."""
        array = np.asarray(array, np.float32)
        if role != "matrix":
            return self.vectors.encode(array), None
        if self.row_scales is None:
            return self.encode(array), None
        scales = self.row_scales.scales(array, what)
        return self.encode(array / scales[:, None]), scales


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
