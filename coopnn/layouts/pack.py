"""Packing a kernel program's constant parameters into one weight buffer, described by a manifest of entries.

Row-major and column-major layouts are packed here; the device-specific optimal layouts are produced by the
driver at load time, from the row-major entries, and only their sizes and offsets are recorded here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.format import WeightFormat

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
    scale_offset: int | None = None  # bytes to the matrix's row scales (`WeightFormat.row_scales`), None: unscaled


@dataclass(frozen=True)
class WeightImage:
    """The bytes a weight buffer holds, and where each constant (matrix or vector) sits in them."""

    data: bytes
    entries: Mapping[str, Entry]

    def entry(self, name: str) -> Entry:
        return self.entries[name]


def align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def pack(constants: Mapping[str, np.ndarray], roles: Mapping[str, str], fmt: WeightFormat,
         matrix_layout: str = "row_major") -> WeightImage:
    """Pack `constants` (param name -> array; `roles` says "matrix" or "vector") into one buffer in format `fmt`.

    Values are stored as the format stores them (`WeightFormat.stored`: vectors in its vector format, a scaled
    format's matrices with their float16 row scales in a vector right after them), so its emulation (the numpy oracle)
    and the buffer agree exactly.
    """
    if matrix_layout not in ("row_major", "column_major"):
        raise ValueError(f"unknown plain layout {matrix_layout!r}; use row_major or column_major")
    chunks: list[tuple[int, bytes]] = []
    entries: dict[str, Entry] = {}
    offset = 0
    for name, array in constants.items():
        is_matrix = roles[name] == "matrix"
        elements, scales = fmt.stored(array, roles[name], f"matrix {name!r}")
        offset = align_up(offset, MATRIX_ALIGNMENT if is_matrix else VECTOR_ALIGNMENT)
        if is_matrix and matrix_layout == "column_major":
            elements = elements.T
        raw = np.ascontiguousarray(elements).tobytes()
        layout = matrix_layout if is_matrix else "vector"
        stride = elements.shape[-1] * elements.itemsize if is_matrix else 0
        chunks.append((offset, raw))
        start, offset = offset, offset + len(raw)
        scale_offset = None
        if scales is not None:
            scale_offset = offset = align_up(offset, VECTOR_ALIGNMENT)
            scale_raw = scales.astype(fmt.row_scales.storage).tobytes()
            chunks.append((offset, scale_raw))
            offset += len(scale_raw)
        entries[name] = Entry(name, start, len(raw), tuple(np.shape(array)), layout,
                              (fmt if is_matrix else fmt.vectors).name, stride, scale_offset)
    buffer = bytearray(align_up(max(offset, 4), 16))
    for start, raw in chunks:
        buffer[start:start + len(raw)] = raw
    return WeightImage(bytes(buffer), entries)


def unpack(packed: WeightImage, name: str) -> np.ndarray:
    """The float32 values of one plain-layout entry (the inverse of `pack`, for tests and inspection)."""
    e = packed.entries[name]
    fmt = weight_format(e.dtype)
    flat = fmt.decode(np.frombuffer(packed.data, fmt.storage, count=e.size // fmt.storage.itemsize, offset=e.offset))
    values = flat.reshape(e.shape[::-1]).T.copy() if e.layout == "column_major" else flat.reshape(e.shape)
    if e.scale_offset is not None:
        storage = fmt.row_scales.storage
        values = values * np.frombuffer(packed.data, storage, count=e.shape[0], offset=e.scale_offset)[:, None]
    return values
