"""Cooperative-vector weights: every matrix-vector product's matrix and bias in the model's weight format, padded,
in one buffer.

A `WeightPlan` holds the matrices and biases encoded in their weight format and padded to whole 16-byte groups of
float16 components (odd sizes, 3 inputs say, get zero columns or rows), so every plain-layout row or column stride
is a multiple of 16 bytes as the extension asks. The plan is packed either in a plain layout (row- or column-major with a stride, by `pack`) or in a
driver-defined one (InferencingOptimal, TrainingOptimal) through a `convert` callable that stands for
vkConvertCooperativeVectorMatrixNV; matrices sit at 64-byte offsets and biases at 16-byte ones. The `WeightImage`
entries are the manifest: offset, size, padded shape, layout and type of each.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import MATRIX_ALIGNMENT, VECTOR_ALIGNMENT, Entry, WeightImage, align_up, pack

# float16 components per 16 bytes: vector loads and stores, and plain-layout strides, come in these steps.
COMPONENT_ALIGNMENT = 8
PLAIN_LAYOUTS = ("row_major", "column_major")
DRIVER_LAYOUTS = ("inferencing_optimal", "training_optimal")

# Turns a row-major matrix of a plan (stored elements) into the bytes of a driver-defined layout (the driver's
# conversion).
Converter = Callable[[np.ndarray], bytes]


def padded(n: int) -> int:
    """`n` components rounded up to whole 16-byte groups of float16."""
    return align_up(n, COMPONENT_ALIGNMENT)


@dataclass(frozen=True)
class WeightPlan:
    """Padded matrices (rows x columns, row-major) and bias vectors by kernel parameter name, as the elements
    `format` stores."""

    matrices: Mapping[str, np.ndarray]
    biases: Mapping[str, np.ndarray]
    format: WeightFormat

    def digest(self) -> str:
        """A hash of the format and every name, shape and value: what a cache of converted weights is keyed by."""
        h = hashlib.sha256(f"{self.format.name};".encode())
        for kind, arrays in (("matrix", self.matrices), ("bias", self.biases)):
            for name, array in arrays.items():
                h.update(f"{kind}:{name}:{array.shape};".encode())
                h.update(array.tobytes())
        return h.hexdigest()


def _pad(array: np.ndarray, shape: tuple[int, ...], fmt: WeightFormat) -> np.ndarray:
    out = np.zeros(shape, np.float32)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return fmt.encode(out)


def plan_weights(matrices: Mapping[str, np.ndarray], biases: Mapping[str, np.ndarray],
                 fmt: WeightFormat) -> WeightPlan:
    """Encode float32 matrices and biases in format `fmt` and pad them to 16-byte groups."""
    return WeightPlan(
        {name: _pad(m, (padded(m.shape[0]), padded(m.shape[1])), fmt) for name, m in matrices.items()},
        {name: _pad(b.reshape(-1), (padded(b.size),), fmt) for name, b in biases.items()}, fmt)


def pack_plan(plan: WeightPlan, layout: str = "row_major", convert: Converter | None = None) -> WeightImage:
    """The plan in one buffer: matrices in `layout`, biases as vectors, all in the plan's format.

    Plain layouts are packed here; driver layouts need `convert`, whose output length is the entry's size.
    """
    if layout in PLAIN_LAYOUTS:
        arrays = {**plan.matrices, **plan.biases}
        roles = {**{name: "matrix" for name in plan.matrices}, **{name: "vector" for name in plan.biases}}
        return pack({name: plan.format.decode(a) for name, a in arrays.items()}, roles, plan.format, layout)
    if layout not in DRIVER_LAYOUTS:
        raise ValueError(f"unknown cooperative-vector layout {layout!r}; supported: "
                         f"{', '.join(PLAIN_LAYOUTS + DRIVER_LAYOUTS)}")
    if convert is None:
        raise ValueError(f"the {layout} layout is the driver's: pass `convert` (vkConvertCooperativeVectorMatrixNV)")
    pieces = [(name, convert(m), m.shape, layout, MATRIX_ALIGNMENT) for name, m in plan.matrices.items()]
    pieces += [(name, b.tobytes(), b.shape, "vector", VECTOR_ALIGNMENT) for name, b in plan.biases.items()]
    entries, offset = {}, 0
    for name, raw, shape, kind, alignment in pieces:
        offset = align_up(offset, alignment)
        entries[name] = Entry(name, offset, len(raw), tuple(shape), kind, plan.format.name)
        offset += len(raw)
    buffer = bytearray(align_up(max(offset, 4), VECTOR_ALIGNMENT))
    for (_, raw, *_), entry in zip(pieces, entries.values()):
        buffer[entry.offset:entry.offset + entry.size] = raw
    return WeightImage(bytes(buffer), entries)
