"""Cooperative-vector weights: every matrix-vector product's matrix and bias in the model's weight format, padded,
in one buffer.

A `WeightPlan` holds the matrices and biases encoded in their weight format and padded to whole 16-byte groups
(odd sizes, 3 inputs say, get zero columns or rows): float16 vectors come in groups of 8 components, and a matrix of
8-bit elements is padded to 16 in both directions, so every plain-layout row or column stride is a multiple of 16
bytes as the extension asks. A scaled format (`WeightFormat.row_scales`: the 8-bit floats) keeps each matrix's float16
row scales beside it (padded rows get scale 1); a format that quantizes inputs (int8) stores one entry per Linear
(`plan_layers`): its elements, then its float32 dequantization scales and its int32 bias. The plan is packed either in a plain layout (row- or column-major
with a stride) or in a driver-defined one (InferencingOptimal, TrainingOptimal) through a `convert` callable that
stands for vkConvertCooperativeVectorMatrixNV; matrices sit at 64-byte offsets, biases and scales at 16-byte ones. The
`WeightImage` entries are the manifest: offset, size, padded shape, layout, type and scale offset of each.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.integer import QuantizedLayer
from coopnn.layouts.pack import MATRIX_ALIGNMENT, VECTOR_ALIGNMENT, Entry, WeightImage, align_up

# float16 components per 16 bytes: vector loads and stores, and plain-layout strides, come in these steps.
COMPONENT_ALIGNMENT = 8
PLAIN_LAYOUTS = ("row_major", "column_major")
LAYOUT_ENUMERANTS = {"row_major": "RowMajorNV", "column_major": "ColumnMajorNV",  # SPIR-V's names of the layouts
                     "inferencing_optimal": "InferencingOptimalNV", "training_optimal": "TrainingOptimalNV"}
DRIVER_LAYOUTS = ("inferencing_optimal", "training_optimal")
GROUP_BYTES = 16

# Turns a row-major matrix of a plan (stored elements) into the bytes of a driver-defined layout (the driver's
# conversion).
Converter = Callable[[np.ndarray], bytes]


def padded(n: int, alignment: int = COMPONENT_ALIGNMENT) -> int:
    """`n` components rounded up to whole groups of `alignment` (16 bytes of float16 by default)."""
    return align_up(n, alignment)


def matrix_alignment(fmt: WeightFormat) -> int:
    """Elements per 16 bytes of `fmt`, at least a float16 vector's group: what a matrix's sides are padded to."""
    return max(COMPONENT_ALIGNMENT, GROUP_BYTES * 8 // fmt.bits)


@dataclass(frozen=True)
class WeightPlan:
    """Padded matrices (rows x columns, row-major) and bias vectors by kernel parameter name, as the elements
    `format` stores, and each matrix's float16 row scales where the format scales rows."""

    matrices: Mapping[str, np.ndarray]
    biases: Mapping[str, np.ndarray]  # a bias under a matrix's own name is that Linear's integer bias (int8)
    format: WeightFormat
    scales: Mapping[str, np.ndarray] = field(default_factory=dict)
    input_scales: Mapping[str, float] = field(default_factory=dict)  # a Linear's input scale (int8)

    def digest(self) -> str:
        """A hash of the format and every name, shape and value: what a cache of converted weights is keyed by."""
        h = hashlib.sha256(f"{self.format.name};{sorted(self.input_scales.items())};".encode())
        for kind, arrays in (("matrix", self.matrices), ("bias", self.biases), ("scales", self.scales)):
            for name, array in arrays.items():
                h.update(f"{kind}:{name}:{array.shape};".encode())
                h.update(array.tobytes())
        return h.hexdigest()


def _pad(stored: np.ndarray, shape: tuple[int, ...], fill=0) -> np.ndarray:
    """`stored` elements in the top-left corner of an array of `shape` filled with `fill` (zero: every format's
    +0 is all zero bits)."""
    out = np.full(shape, fill, stored.dtype)
    out[tuple(slice(0, n) for n in stored.shape)] = stored
    return out


def plan_weights(matrices: Mapping[str, np.ndarray], biases: Mapping[str, np.ndarray],
                 fmt: WeightFormat) -> WeightPlan:
    """Encode float32 matrices and biases in format `fmt` (matrices with their row scales where it scales them) and
    pad them to 16-byte groups."""
    alignment = matrix_alignment(fmt)
    planned, scales = {}, {}
    for name, matrix in matrices.items():
        elements, row_scales = fmt.stored(matrix, "matrix", f"matrix {name!r}")
        rows, columns = padded(matrix.shape[0], alignment), padded(matrix.shape[1], alignment)
        planned[name] = _pad(elements, (rows, columns))
        if row_scales is not None:
            scales[name] = _pad(row_scales.astype(fmt.row_scales.storage), (rows,), fill=1)
    planned_biases = {name: _pad(fmt.vectors.encode(b.reshape(-1)), (padded(b.size, alignment),))
                      for name, b in biases.items()}
    return WeightPlan(planned, planned_biases, fmt, scales)


def plan_layers(layers: Mapping[str, QuantizedLayer], fmt: WeightFormat) -> WeightPlan:
    """Linears of a format that quantizes inputs (int8), by entry name: their elements padded to 16 a side, their
    dequantization scales (float32) and integer bias (int32) padded with zeros, and their input scales."""
    alignment = matrix_alignment(fmt)
    matrices, biases, scales = {}, {}, {}
    for name, layer in layers.items():
        rows, columns = (padded(n, alignment) for n in layer.elements.shape)
        matrices[name] = _pad(layer.elements, (rows, columns))
        scales[name] = _pad(layer.dequantization, (rows,))
        if layer.bias is not None:
            biases[name] = _pad(layer.bias, (rows,))
    return WeightPlan(matrices, biases, fmt, scales, {name: float(layer.input_scale) for name, layer in layers.items()})


def _plain(matrix: np.ndarray, layout: str) -> tuple[bytes, int]:
    """The bytes of `matrix` in a plain layout, and its stride (bytes between rows or columns)."""
    stored = np.ascontiguousarray(matrix.T if layout == "column_major" else matrix)
    return stored.tobytes(), stored.shape[1] * stored.itemsize


def pack_plan(plan: WeightPlan, layout: str = "row_major", convert: Converter | None = None) -> WeightImage:
    """The plan in one buffer: matrices in `layout` (each followed by its row scales, if any), biases as vectors.

    Plain layouts are packed here; driver layouts need `convert`, whose output length is the entry's size.
    """
    if layout not in PLAIN_LAYOUTS + DRIVER_LAYOUTS:
        raise ValueError(f"unknown cooperative-vector layout {layout!r}; supported: "
                         f"{', '.join(PLAIN_LAYOUTS + DRIVER_LAYOUTS)}")
    if layout in DRIVER_LAYOUTS and convert is None:
        raise ValueError(f"the {layout} layout is the driver's: pass `convert` (vkConvertCooperativeVectorMatrixNV)")
    chunks: list[tuple[int, bytes]] = []
    entries, end = {}, 0

    def place(raw: bytes, alignment: int) -> int:
        nonlocal end
        offset = align_up(end, alignment)
        chunks.append((offset, raw))
        end = offset + len(raw)
        return offset

    def place_vector(vectors: Mapping[str, np.ndarray], name: str) -> int | None:
        return place(vectors[name].tobytes(), VECTOR_ALIGNMENT) if name in vectors else None

    for name, matrix in plan.matrices.items():
        raw, stride = _plain(matrix, layout) if layout in PLAIN_LAYOUTS else (convert(matrix), 0)
        offset = place(raw, MATRIX_ALIGNMENT)
        scale_offset = place_vector(plan.scales, name)
        bias_offset = place_vector(plan.biases, name)
        entries[name] = Entry(name, offset, len(raw), matrix.shape, layout, plan.format.name, stride, scale_offset,
                              bias_offset, input_scale=plan.input_scales.get(name))
    for name, bias in plan.biases.items():
        if name in plan.matrices:
            continue
        raw = bias.tobytes()
        entries[name] = Entry(name, place(raw, VECTOR_ALIGNMENT), len(raw), bias.shape, "vector",
                              plan.format.vectors.name)
    buffer = bytearray(align_up(max(end, 4), VECTOR_ALIGNMENT))
    for offset, raw in chunks:
        buffer[offset:offset + len(raw)] = raw
    return WeightImage(bytes(buffer), entries)
