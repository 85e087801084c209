"""What a weight format is: the one record (`WeightFormat`) that says how weights are stored, read and emulated.

Every step after `weights=` is resolved (`coopnn.layouts.formats.weight_format`) takes this record, never the name:
packing encodes with it (`stored`), shaders read `bits`-wide elements with its `shader_features`, the
cooperative-vector driver converts its `component_type`, and the numpy oracle rounds with `emulate` (and, for a
format with `row_scales`, follows the float16 arithmetic of `coopnn.layouts.formats.emulation`, or for one with
`input_quantization` the integer arithmetic of `coopnn.layouts.formats.integer`). A block format (`blocks`: GGML's
Q8_0 and Q4_0, `coopnn.layouts.formats.blocks`) stores each matrix row as blocks of weights sharing a scale; its
`emulate` drops the padding of the last block, and both it and `stored` refuse weights a block cannot hold.

A format that quantizes inputs needs one input scale per Linear, measured on calibration data
(`coopnn.layouts.formats.calibration`): `calibrated` gives the format carrying them, equal to the format itself (so
every backend that accepts the format accepts it calibrated), and `input_scale` reads one back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np

from coopnn.errors import CompileError, InputError


@dataclass(frozen=True)
class RowScales:
    """Matrices stored as `encode(W / scale[row])` with one scale per output row, of type `storage`, applied after the
    product (the 8-bit floats: float16, in float16, `coopnn.layouts.formats.emulation` defines the order; int8:
    float32, `coopnn.layouts.formats.integer`). A row's scale is the smallest `storage` number at which its largest
    |weight| is stored at most `largest` (so nothing in the row saturates); a zero row gets scale 1."""

    largest: float  # the value a row's largest |weight| is stored as (up to the rounding of its float16 scale)
    storage: np.dtype = np.dtype(np.float16)  # how scales are stored: float16, as the product they multiply

    def scales(self, matrix: np.ndarray, what: str = "a matrix") -> np.ndarray:
        """The float16 scale of each row of `matrix` (rows x columns), as float32; CompileError for a weight that is
        not finite or too large (no scale keeps it in range)."""
        matrix = np.asarray(matrix, np.float32)
        if not np.isfinite(matrix).all():
            raise CompileError(f"{what} has weights that are not finite (NaN or infinity), which a scaled 8-bit "
                               f"format cannot store; use weights='fp16' or 'fp32'")
        top = np.abs(matrix).max(axis=1).astype(np.float64) if matrix.size else np.zeros(len(matrix))
        wanted = top / self.largest
        with np.errstate(over="ignore"):
            scales = wanted.astype(self.storage)
        if not np.isfinite(scales).all():
            row = int(np.argmin(np.isfinite(scales)))
            limit = float(np.finfo(self.storage).max) * self.largest
            raise CompileError(f"{what} has a weight of magnitude {top[row]:.6g} (row {row}), beyond what a scaled "
                               f"8-bit format stores (its {self.storage} row scale times {self.largest:g}: up to "
                               f"{limit:.6g}); use weights='fp32'")
        low = scales.astype(np.float64) < wanted  # rounded below: the row's largest weight would saturate
        scales[low] = np.nextafter(scales[low], self.storage.type(np.inf))
        scales[top == 0] = 1
        return scales.astype(np.float32)


@dataclass(frozen=True)
class Blocks:
    """Matrices stored in blocks of `size` consecutive weights along each row (the input dimension), each block one
    element of the format's `storage`: a float16 scale d, then one code q of the format's `bits` per weight (signed
    when `signed`), holding the weights d * (q - zero); rows are padded with zeros to whole blocks. A block's scale
    is its largest |weight| over `largest` (signed as the format says), so the block holds weights of magnitude up
    to `largest` times float16's range."""

    size: int
    largest: int
    zero: int
    signed: bool

    def count(self, columns: int) -> int:
        """The blocks a row of `columns` weights takes."""
        return -(-columns // self.size)

    def check(self, matrix: np.ndarray, what: str, name: str) -> None:
        """CompileError naming `what` for weights that blocks of format `name` cannot store."""
        if not np.isfinite(matrix).all():
            raise CompileError(f"{what} has weights that are not finite (NaN or infinity), which weights={name!r} "
                               f"cannot store; use weights='fp16' or 'fp32'")
        top = np.float32(np.abs(matrix).max()) if matrix.size else np.float32(0)
        with np.errstate(over="ignore"):
            scale = (top / np.float32(self.largest)).astype(np.float16)
        if not np.isfinite(scale):
            raise CompileError(f"{what} has a weight of magnitude {float(top):.6g}, beyond what weights={name!r} "
                               f"stores (its float16 block scale times {self.largest}: below "
                               f"{65520 * self.largest:.6g}); use weights='fp32'")


ACCUMULATOR_LIMIT = 2 ** 31 - 1  # the largest 32-bit integer, the accumulator's and the bias's type
SMALLEST_INPUT_SCALE = float(np.finfo(np.float32).tiny)  # 2^-126: the multiplier 1 / s_x stays finite


@dataclass(frozen=True)
class InputQuantization:
    """Each Linear's input quantized to the format's elements with one float32 scale per Linear, measured on
    calibration data: the largest |value| seen reaching the Linear is stored as `largest`."""

    largest: float

    def scale(self, largest_value: float) -> float:
        """The input scale s_x of a Linear whose input's largest finite |value| on the calibration data is
        `largest_value` (`coopnn.layouts.formats.integer`)."""
        rule = RowScales(self.largest, np.dtype(np.float32))
        scale = rule.scales(np.array([[largest_value]], np.float32))[0]
        return float(max(scale, np.float32(SMALLEST_INPUT_SCALE)))

    @property
    def max_columns(self) -> int:
        """The most columns a Linear may have for its 32-bit integer sums to be exact."""
        return ACCUMULATOR_LIMIT // int(self.largest) ** 2

    def bias_limit(self, columns: int) -> int:
        """The largest |b_q| for which acc + b_q stays a 32-bit integer."""
        return ACCUMULATOR_LIMIT - int(self.largest) ** 2 * columns


@dataclass(frozen=True)
class WeightFormat:
    name: str  # what `weights=` and the manifest entries of a weight image (`layouts.pack.Entry.dtype`) call it
    label: str  # how messages name its numbers ("float16")
    description: str
    storage: np.dtype  # the numpy type of one stored element
    bits: int  # the width of one stored element, as shaders read it
    # VkComponentTypeKHR name of one element, as cooperative vectors interpret and convert it; None: no component
    # type holds one (a 4-bit code), and cooperative vectors cannot take the format
    component_type: str | None
    shader_features: frozenset[str]  # Vulkan features a shader needs to read and widen elements of this format
    encode: Callable[[np.ndarray], np.ndarray]  # float32 weights -> stored elements: the packing rule
    decode: Callable[[np.ndarray], np.ndarray]  # stored elements -> the float32 values they hold
    row_scales: RowScales | None = None  # matrices scaled per output row before encoding; None: stored as they are
    vector_format: WeightFormat | None = None  # how vectors (biases) are stored; None: in this format
    # each Linear's input quantized to this format's elements with a scale from calibration data; None: inputs stay
    # floats
    input_quantization: InputQuantization | None = None
    blocks: Blocks | None = None  # matrices stored as blocks of weights sharing a scale; None: element by element
    # the input scale of each Linear by node name, once calibrated (`calibrated`): data, as weights are, so not
    # part of what the format is (equality, hash)
    input_scales: Mapping[str, float] | None = field(default=None, compare=False, repr=False)

    @property
    def vectors(self) -> WeightFormat:
        """The format vectors (biases) are stored in."""
        return self.vector_format or self

    def calibrated(self, input_scales: Mapping[str, float]) -> WeightFormat:
        """This format carrying `input_scales` (node name -> the scale of that Linear's input)."""
        return replace(self, input_scales=MappingProxyType({k: float(v) for k, v in input_scales.items()}))

    def input_scale(self, layer: str) -> float:
        """The input scale of Linear node `layer`; InputError when the format was not calibrated (for this graph)."""
        if self.input_scales is None:
            raise InputError(f"weights={self.name!r} has no input scales: load or compile with calibration=")
        if layer not in self.input_scales:
            raise InputError(f"weights={self.name!r} was calibrated for another model: it has no input scale for "
                             f"Linear {layer!r}; calibrate again with calibration=")
        return self.input_scales[layer]

    def emulate(self, weights: np.ndarray, what: str = "a matrix") -> np.ndarray:
        """float32 weights rounded to the values the format stores, as float32: the numpy oracle of packed weights,
        equal to them by construction (a block format's padding dropped; CompileError naming `what` for weights it
        cannot store)."""
        if self.blocks is None:
            return self.decode(self.encode(weights))
        weights = np.asarray(weights, np.float32)
        self.blocks.check(weights, what, self.name)
        return self.decode(self.encode(weights))[..., :weights.shape[-1]]

    def stored(self, array: np.ndarray, role: str, what: str = "a matrix") -> tuple[np.ndarray, np.ndarray | None]:
        """The elements a constant of `role` ("matrix" or "vector") is stored as, and its row scales (float32 holding
        float16 values) where the format scales matrices, else None: what packing writes and the oracle reads (a
        block format's matrix: a row of blocks per row); CompileError naming `what` for weights it cannot store."""
        array = np.asarray(array, np.float32)
        if role != "matrix":
            return self.vectors.encode(array), None
        if self.blocks is not None:
            self.blocks.check(array, what, self.name)
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
