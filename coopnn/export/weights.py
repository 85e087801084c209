"""The weights file of an export and its manifest entries: every layer's matrix (row-major, padded to whole 16-byte
rows) and bias in the chosen format, then the input stage's tables (a grid's feature vectors), at the offsets the
shaders read them from.

Matrices start at 64-byte offsets and biases at 16-byte ones, as VK_NV_cooperative_vector asks of the buffers it
reads; rows and columns are padded with zeros to whole groups of 16 bytes, so that a row-major stride is a multiple
of 16 bytes (the extension's rule for plain layouts) and a float16 vector of the padded width loads whole. The file
is the portable variant's buffer as it is; the cooperative-vector variant's buffer holds each matrix converted to
InferencingOptimal on the engine's device (`coopnn.export.device`, `coopnn_weights.h`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from coopnn.errors import CompileError, InputError
from coopnn.export.plan import ExportPlan
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import MATRIX_ALIGNMENT, VECTOR_ALIGNMENT, align_up

# The formats an export writes: name -> (the component type and interpretation both helpers and shaders name, and
# whether the cooperative-vector variant reads it).
EXPORT_FORMATS = {"fp16": ("float16", True), "fp32": ("float32", False)}
ROW_BYTES = 16


def export_format(weights: str | WeightFormat) -> WeightFormat:
    """The format named `weights`, or CompileError naming it and the formats an export writes."""
    fmt = weight_format(weights)
    if fmt.name not in EXPORT_FORMATS:
        raise CompileError(f"weights={fmt.name!r}: the shader export writes {' or '.join(EXPORT_FORMATS)} weights "
                           f"(the shaders read them as plain floats)")
    return fmt


@dataclass(frozen=True)
class Region:
    """Bytes [offset, offset + size) of the weights file: a matrix of rows x columns (row-major, `stride` bytes a
    row) or a vector of `rows` elements (columns 0)."""

    offset: int
    size: int
    rows: int
    columns: int = 0
    stride: int = 0


@dataclass(frozen=True)
class LayerRegions:
    matrix: Region
    bias: Region


def padded(n: int, fmt: WeightFormat) -> int:
    """`n` elements of `fmt` rounded up to whole 16-byte groups."""
    return align_up(n, ROW_BYTES * 8 // fmt.bits)


@dataclass(frozen=True)
class FileLayout:
    """Where everything sits in the weights file: each layer's matrix and bias, then each table; its size."""

    layers: tuple[LayerRegions, ...]
    tables: tuple[Region, ...]
    size: int


def layout(plan: ExportPlan, fmt: WeightFormat) -> FileLayout:
    element = fmt.bits // 8
    layers, end = [], 0
    for layer in plan.layers:
        rows, columns = padded(layer.outputs, fmt), padded(layer.inputs, fmt)
        matrix = Region(align_up(end, MATRIX_ALIGNMENT), rows * columns * element, rows, columns, columns * element)
        bias = Region(align_up(matrix.offset + matrix.size, VECTOR_ALIGNMENT), rows * element, rows)
        layers.append(LayerRegions(matrix, bias))
        end = bias.offset + bias.size
    tables = []
    for _, values in plan.tables:
        tables.append(Region(align_up(end, VECTOR_ALIGNMENT), padded(len(values), fmt) * element, len(values)))
        end = tables[-1].offset + tables[-1].size
    return FileLayout(tuple(layers), tuple(tables), align_up(end, VECTOR_ALIGNMENT))


def encode(plan: ExportPlan, fmt: WeightFormat) -> bytes:
    """The weights file's bytes."""
    where = layout(plan, fmt)
    data = bytearray(where.size)
    for layer, regions in zip(plan.layers, where.layers):
        matrix = np.zeros((regions.matrix.rows, regions.matrix.columns), np.float32)
        matrix[:layer.outputs, :layer.inputs] = layer.weight
        bias = np.zeros(regions.bias.rows, np.float32)
        bias[:layer.outputs] = layer.bias
        _put(data, regions.matrix, matrix, fmt)
        _put(data, regions.bias, bias, fmt)
    for (_, values), region in zip(plan.tables, where.tables):
        _put(data, region, values, fmt)
    return bytes(data)


def _put(data: bytearray, region: Region, values: np.ndarray, fmt: WeightFormat) -> None:
    encoded = np.ascontiguousarray(fmt.encode(np.asarray(values, np.float32))).tobytes()
    data[region.offset:region.offset + len(encoded)] = encoded


def fnv1a64(data: bytes) -> int:
    """The 64-bit FNV-1a hash of `data`: the check `coopnn_weights.h` repeats in C without a hashing library."""
    words = np.frombuffer(data, np.uint8)
    h = 0xCBF29CE484222325
    prime = 0x100000001B3
    for byte in words.tolist():
        h = ((h ^ byte) * prime) & 0xFFFFFFFFFFFFFFFF
    return h


def digests(data: bytes) -> dict[str, str]:
    return {"sha256": hashlib.sha256(data).hexdigest(), "fnv1a64": f"{fnv1a64(data):016x}"}


def check_file(data: bytes, manifest: dict, path: str) -> None:
    """InputError naming `path` when `data` is not the weights file `manifest` describes (size and SHA-256)."""
    expected = manifest["weights"]
    if len(data) != expected["size"]:
        raise InputError(f"{path} holds {len(data)} bytes; its manifest describes {expected['size']} "
                         f"(a weights file of another export or export version?)")
    if hashlib.sha256(data).hexdigest() != expected["sha256"]:
        raise InputError(f"{path} does not match its manifest's SHA-256 (changed or damaged since the export)")
