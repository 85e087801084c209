"""Packing a kernel program's constant parameters into one weight buffer, described by a manifest of entries.

Row-major and column-major layouts are packed here; the device-specific optimal layouts are produced by the
driver at load time, from the row-major entries, and only their sizes and offsets are recorded here.

A block format (q8_0, q4_0) stores each matrix row as its blocks, rows one after another (`Entry.stride` bytes
apart), and only row-major.

A format that quantizes inputs (int8) stores each Linear as one entry of its own (`Layer`), as its scales and bias
depend on the Linear's input scale: the elements, then its dequantization scales, its integer bias and its input
multiplier, each at its offset (`coopnn.layouts.formats.integer` says what they are).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.integer import quantize_layer

# The cooperative-vector extension needs matrices at 64-byte and vectors at 16-byte offsets; the portable target
# is satisfied by the same alignment, so every layout uses it.
MATRIX_ALIGNMENT = 64
VECTOR_ALIGNMENT = 16


@dataclass(frozen=True)
class Entry:
    name: str
    offset: int  # bytes from the start of the buffer
    size: int  # bytes
    shape: tuple[int, ...]
    layout: str  # "vector", "row_major", "column_major", "inferencing_optimal", "training_optimal"
    dtype: str  # the name of the weight format its elements are stored in ("fp32", "fp16", ...)
    stride: int = 0  # bytes between rows (row-major) or columns (column-major); 0 for vectors and optimal layouts
    # bytes to the matrix's row scales (`WeightFormat.row_scales`; for a `Layer`, its dequantization scales d, the
    # row scales times the input scale), None: unscaled
    scale_offset: int | None = None
    bias_offset: int | None = None  # a `Layer`: bytes to its integer bias b_q (int32), None: it has none
    input_offset: int | None = None  # a `Layer`: bytes to its input multiplier m = 1 / s_x (float32)
    input_scale: float | None = None  # a `Layer`: its input scale s_x


@dataclass(frozen=True)
class WeightImage:
    """The bytes a weight buffer holds, and where each constant (matrix or vector) sits in them."""

    data: bytes
    entries: Mapping[str, Entry]

    def entry(self, name: str) -> Entry:
        return self.entries[name]


@dataclass(frozen=True)
class Layer:
    """A Linear packed as one entry, for a format that quantizes inputs (`WeightFormat.input_quantization`)."""

    matrix: np.ndarray  # rows x columns, float32
    bias: np.ndarray | None
    input_scale: float  # s_x, measured on calibration data


def align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


class _Buffer:
    """Byte strings placed one after another, each aligned."""

    def __init__(self):
        self.chunks: list[tuple[int, bytes]] = []
        self.end = 0

    def place(self, raw: bytes, alignment: int) -> int:
        offset = align_up(self.end, alignment)
        self.chunks.append((offset, raw))
        self.end = offset + len(raw)
        return offset

    def data(self) -> bytes:
        buffer = bytearray(align_up(max(self.end, 4), 16))
        for start, raw in self.chunks:
            buffer[start:start + len(raw)] = raw
        return bytes(buffer)


def pack(constants: Mapping[str, np.ndarray], roles: Mapping[str, str], fmt: WeightFormat,
         matrix_layout: str = "row_major", layers: Mapping[str, Layer] | None = None) -> WeightImage:
    """Pack `constants` (param name -> array; `roles` says "matrix" or "vector") into one buffer in format `fmt`,
    and `layers` (entry name -> Layer) where the format quantizes inputs.

    Values are stored as the format stores them (`WeightFormat.stored`: vectors in its vector format, a scaled
    format's matrices with their row scales in a vector right after them; a Layer as `quantize_layer` gives it), so
    its emulation (the numpy oracle) and the buffer agree exactly.
    """
    if matrix_layout not in ("row_major", "column_major"):
        raise ValueError(f"unknown plain layout {matrix_layout!r}; use row_major or column_major")
    if fmt.blocks is not None and matrix_layout != "row_major":
        raise ValueError(f"{fmt.name} stores blocks along rows: its matrices are row_major only")
    buffer = _Buffer()
    entries: dict[str, Entry] = {}

    def place_matrix(elements: np.ndarray) -> tuple[int, int, int]:
        """Offset, size and stride of `elements` (rows x columns) placed in `matrix_layout`."""
        if matrix_layout == "column_major":
            elements = elements.T
        raw = np.ascontiguousarray(elements).tobytes()
        return buffer.place(raw, MATRIX_ALIGNMENT), len(raw), elements.shape[-1] * elements.itemsize

    for name, array in constants.items():
        elements, scales = fmt.stored(array, roles[name], f"matrix {name!r}")
        if roles[name] != "matrix":
            raw = np.ascontiguousarray(elements).tobytes()
            entries[name] = Entry(name, buffer.place(raw, VECTOR_ALIGNMENT), len(raw), tuple(np.shape(array)),
                                  "vector", fmt.vectors.name)
            continue
        offset, size, stride = place_matrix(elements)
        scale_offset = None
        if scales is not None:
            scale_offset = buffer.place(scales.astype(fmt.row_scales.storage).tobytes(), VECTOR_ALIGNMENT)
        entries[name] = Entry(name, offset, size, tuple(np.shape(array)), matrix_layout, fmt.name, stride,
                              scale_offset)
    for name, layer in (layers or {}).items():
        if name in entries:
            raise ValueError(f"entry {name!r} packed twice")
        stored = quantize_layer(fmt, layer.matrix, layer.bias, layer.input_scale, f"Linear {name!r}")
        offset, size, stride = place_matrix(stored.elements)
        scale_offset = buffer.place(stored.dequantization.tobytes(), VECTOR_ALIGNMENT)
        bias_offset = None if stored.bias is None else buffer.place(stored.bias.tobytes(), VECTOR_ALIGNMENT)
        input_offset = buffer.place(np.float32(stored.multiplier).tobytes(), VECTOR_ALIGNMENT)
        entries[name] = Entry(name, offset, size, tuple(np.shape(layer.matrix)), matrix_layout, fmt.name, stride,
                              scale_offset, bias_offset, input_offset, float(stored.input_scale))
    return WeightImage(buffer.data(), entries)


def unpack(packed: WeightImage, name: str) -> np.ndarray:
    """The float32 values of one plain-layout entry (the inverse of `pack`, for tests and inspection; a Layer's
    weights up to the rounding of its dequantization scales, d / s_x standing for its row scales)."""
    e = packed.entries[name]
    fmt = weight_format(e.dtype)
    raw = np.frombuffer(packed.data, fmt.storage, count=e.size // fmt.storage.itemsize, offset=e.offset)
    shape = e.shape[::-1] if e.layout == "column_major" else e.shape
    # a block format decodes whole blocks: each stored row to a multiple of the block size, the padding dropped
    values = fmt.decode(raw.reshape(shape[:-1] + (-1,)))[..., :shape[-1]]
    values = values.T.copy() if e.layout == "column_major" else values
    if e.scale_offset is not None:
        storage = fmt.row_scales.storage
        scales = np.frombuffer(packed.data, storage, count=e.shape[0], offset=e.scale_offset)
        if e.input_scale is not None:
            scales = scales / storage.type(e.input_scale)
        values = values * scales[:, None]
    return values
