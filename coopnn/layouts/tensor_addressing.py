"""Tensor layouts and tensor views (SPV_NV_tensor_addressing) and the addressing of cooperative-matrix tensor loads
and stores through them (SPV_NV_cooperative_matrix2, SPV_NV_cooperative_matrix_decode_vector), in numpy: the
reference the coopmat2 kernels are tested against.

`TensorLayout` and `TensorView` hold the specification's logical state; each method is one OpTensorLayout*/
OpTensorView* instruction and returns a new object. The functions named after the specification's pseudo-code
(`matrix_coord_to_linear`, `linear_to_span_coord`, ...) follow it step by step, on numpy arrays of matrix
coordinates. `tensor_elements` addresses a whole matrix, `matrix_coord_to_tensor_element` one element; the loads
and stores that use them are in tensor_memory.py.

Where the specification leaves behaviour undefined (an out-of-bounds access under clamp mode Undefined, a division by
a zero size) this model raises `TensorAddressingError` rather than pick a value.
Coordinates are computed exactly, without the 32-bit wrap-around of the pseudo-code's `uint32_t`: no valid use
reaches it. The clamp value is read as the bit pattern of the matrix's component type in its low bits (0xFC00 is
-inf for float16), as llama.cpp's flash-attention shader uses it; the specification only says "set result value to
t.clampValue".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum
from typing import Sequence

import numpy as np

from coopnn.errors import TensorAddressingError

MAX_DIM = 5
UINT32_LIMIT = 1 << 32
INT32_RANGE = (-(1 << 31), 1 << 31)
UNCLIPPED_SPAN = 0xFFFFFFFF


class ClampMode(Enum):
    """Tensor Clamp Mode; the values are the SPIR-V enumerant names."""

    UNDEFINED = "Undefined"
    CONSTANT = "Constant"
    CLAMP_TO_EDGE = "ClampToEdge"
    REPEAT = "Repeat"
    REPEAT_MIRRORED = "RepeatMirrored"


def _uint32s(what: str, values: Sequence[int], count: int) -> tuple[int, ...]:
    values = tuple(int(v) for v in values)
    if len(values) != count:
        raise TensorAddressingError(f"{what} takes {count} operand(s), one per dimension; got {len(values)}")
    if any(not 0 <= v < UINT32_LIMIT for v in values):
        raise TensorAddressingError(f"{what} operands are 32-bit unsigned integers; got {values}")
    return values


def _check_dim(what: str, dim: int) -> None:
    if not 1 <= dim <= MAX_DIM:
        raise TensorAddressingError(f"{what} has 1 to {MAX_DIM} dimensions; got {dim}")


@dataclass(frozen=True)
class TensorLayout:
    """tensorLayoutNV<Dim, ClampMode>: the layout of a tensor in memory and the region (offset, span) accessed."""

    clamp_mode: ClampMode
    block_size: tuple[int, ...]
    dimension: tuple[int, ...]  # layoutDimension
    stride: tuple[int, ...]
    offset: tuple[int, ...]
    span: tuple[int, ...]
    clamp_value: int = 0

    @property
    def dim(self) -> int:
        return len(self.block_size)

    @classmethod
    def create(cls, dim: int, clamp_mode: ClampMode = ClampMode.UNDEFINED) -> TensorLayout:
        """OpCreateTensorLayoutNV: dimensions, strides, spans, offsets and the clamp value zero, block sizes one."""
        _check_dim("a tensor layout", dim)
        zeros = (0,) * dim
        return cls(ClampMode(clamp_mode), (1,) * dim, zeros, zeros, zeros, zeros)

    def set_dimension(self, *dims: int) -> TensorLayout:
        """OpTensorLayoutSetDimensionNV: dimensions and spans set, offsets zero, strides packed (in blocks)."""
        dims = _uint32s("OpTensorLayoutSetDimensionNV", dims, self.dim)
        stride = [1] * self.dim
        for i in range(self.dim - 2, -1, -1):
            stride[i] = stride[i + 1] * -(-dims[i + 1] // self.block_size[i + 1])
        return replace(self, dimension=dims, span=dims, offset=(0,) * self.dim, stride=tuple(stride))

    def set_stride(self, *strides: int) -> TensorLayout:
        """OpTensorLayoutSetStrideNV; Stride<i> must be at least Stride<i+1> * ceil(layoutDimension[i+1] /
        blockSize[i+1])."""
        strides = _uint32s("OpTensorLayoutSetStrideNV", strides, self.dim)
        for i in range(self.dim - 1):
            least = strides[i + 1] * -(-self.dimension[i + 1] // self.block_size[i + 1])
            if strides[i] < least:
                raise TensorAddressingError(f"OpTensorLayoutSetStrideNV: stride {i} is {strides[i]}, less than "
                                            f"stride {i + 1} times the blocks of dimension {i + 1} ({least})")
        return replace(self, stride=strides)

    def slice(self, offsets: Sequence[int], spans: Sequence[int]) -> TensorLayout:
        """OpTensorLayoutSliceNV: each offset added to the current one (int32), each span replaced."""
        spans = _uint32s("OpTensorLayoutSliceNV spans", spans, self.dim)
        if len(offsets) != self.dim:
            raise TensorAddressingError(f"OpTensorLayoutSliceNV takes {self.dim} offsets; got {len(offsets)}")
        offset = tuple(int(a) + int(b) for a, b in zip(self.offset, offsets))
        if any(not INT32_RANGE[0] <= o < INT32_RANGE[1] for o in offset):
            raise TensorAddressingError(f"OpTensorLayoutSliceNV: offsets {offset} do not fit in 32-bit signed integers")
        return replace(self, offset=offset, span=spans)

    def set_block_size(self, *sizes: int) -> TensorLayout:
        """OpTensorLayoutSetBlockSizeNV: strides count blocks from now on; set it before the dimensions."""
        sizes = _uint32s("OpTensorLayoutSetBlockSizeNV", sizes, self.dim)
        if 0 in sizes:
            raise TensorAddressingError(f"OpTensorLayoutSetBlockSizeNV: block sizes must be positive; got {sizes}")
        return replace(self, block_size=sizes)

    def set_clamp_value(self, value: int) -> TensorLayout:
        """OpTensorLayoutSetClampValueNV: the 32 bits an out-of-bounds load returns under clamp mode Constant."""
        return replace(self, clamp_value=_uint32s("OpTensorLayoutSetClampValueNV", (value,), 1)[0])

    def clamp_element(self, dtype: np.dtype) -> np.ndarray:
        """The clamp value as a scalar of `dtype`: its low bits read as that type."""
        dtype = np.dtype(dtype)
        bits = self.clamp_value & ((1 << (8 * dtype.itemsize)) - 1)
        return np.array(bits, np.dtype(f"<u{dtype.itemsize}")).view(dtype)[()]


@dataclass(frozen=True)
class TensorView:
    """tensorViewNV<Dim, hasDimensions, p0, ...>: reinterprets the accessed region's dimensions, permutes them and
    clips the matrix. Clip offsets and spans are (row offset, row span, column offset, column span)."""

    has_dimensions: bool
    permutation: tuple[int, ...]
    dimension: tuple[int, ...]  # viewDimension
    stride: tuple[int, ...]  # viewStride
    clip: tuple[int, int, int, int] = (0, UNCLIPPED_SPAN, 0, UNCLIPPED_SPAN)

    @property
    def dim(self) -> int:
        return len(self.permutation)

    @classmethod
    def create(cls, dim: int, has_dimensions: bool, permutation: Sequence[int] | None = None) -> TensorView:
        """OpCreateTensorViewNV: dimensions and strides zero, clip offsets 0 and spans 0xFFFFFFFF."""
        _check_dim("a tensor view", dim)
        permutation = tuple(range(dim)) if permutation is None else tuple(int(p) for p in permutation)
        if sorted(permutation) != list(range(dim)):
            raise TensorAddressingError(f"a tensor view's p0..p{dim - 1} must permute 0..{dim - 1}; got {permutation}")
        return cls(bool(has_dimensions), permutation, (0,) * dim, (0,) * dim)

    def set_dimension(self, *dims: int) -> TensorView:
        """OpTensorViewSetDimensionNV: dimensions set, each stride the product of the dimensions after it."""
        dims = _uint32s("OpTensorViewSetDimensionNV", dims, self.dim)
        return replace(self, dimension=dims, stride=tuple(math.prod(dims[i + 1:]) for i in range(self.dim)))

    def set_stride(self, *strides: int) -> TensorView:
        """OpTensorViewSetStrideNV (0 repeats a dimension: a bias row broadcast over a tile, say)."""
        return replace(self, stride=_uint32s("OpTensorViewSetStrideNV", strides, self.dim))

    def set_clip(self, row_offset: int, row_span: int, col_offset: int, col_span: int) -> TensorView:
        """OpTensorViewSetClipNV: only matrix elements inside the clip rectangle are loaded or stored."""
        return replace(self, clip=_uint32s("OpTensorViewSetClipNV", (row_offset, row_span, col_offset, col_span), 4))


def _ints(value) -> np.ndarray:
    return np.asarray(value, dtype=np.int64)


def matrix_coord_to_linear(row, col, columns: int, view: TensorView | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of a matrix of `columns` columns -> (row-major index, clipped). With a view the index is relative
    to the clip rectangle, whose width is min(columns, clipColSpan); clipped elements are skipped (index 0)."""
    row, col = np.broadcast_arrays(_ints(row), _ints(col))
    if view is None:
        return row * columns + col, np.zeros(row.shape, bool)
    row_offset, row_span, col_offset, col_span = view.clip
    clipped = (row < row_offset) | (row >= row_offset + row_span) | (col < col_offset) | (col >= col_offset + col_span)
    index = (row - row_offset) * min(columns, col_span) + (col - col_offset)
    return np.where(clipped, 0, index), clipped


def _nonzero(what: str, sizes: Sequence[int]) -> None:
    if 0 in sizes:
        raise TensorAddressingError(f"{what} {tuple(sizes)} has a zero: the index arithmetic divides by it")


def linear_to_span_coord(layout: TensorLayout, index) -> np.ndarray:
    """A row-major index within the span -> span coordinates, (LDim, ...)."""
    _nonzero("the tensor layout's span", layout.span)
    index = _ints(index)
    coord = np.zeros((layout.dim, *index.shape), np.int64)
    for dim in range(layout.dim - 1, -1, -1):
        coord[dim] = index % layout.span[dim]
        index = index // layout.span[dim]
    return coord


def span_coord_to_tensor_coord(layout: TensorLayout, span_coord: np.ndarray, store: bool = False):
    """Span coordinates -> (blockCoord, coordInBlock, out_of_bounds, undefined). An out-of-bounds coordinate is
    clamped as the layout's clamp mode says; for stores every mode but Undefined discards, like Constant.
    `out_of_bounds` marks elements that load the clamp value (or are not stored), `undefined` those the
    specification leaves undefined; the coordinates of both are 0."""
    mode = layout.clamp_mode
    if store and mode is not ClampMode.UNDEFINED:
        mode = ClampMode.CONSTANT
    shape = span_coord.shape[1:]
    out_of_bounds, undefined = np.zeros(shape, bool), np.zeros(shape, bool)
    tensor_coord = np.zeros_like(span_coord)
    for dim in range(layout.dim):
        c = span_coord[dim] + layout.offset[dim]
        size = layout.dimension[dim]
        outside = (c < 0) | (c >= size)
        if mode is ClampMode.UNDEFINED:
            undefined |= outside
        elif mode is ClampMode.CONSTANT:
            out_of_bounds |= outside
        elif mode is ClampMode.CLAMP_TO_EDGE and size > 0:
            c = np.clip(c, 0, size - 1)
        elif mode is ClampMode.REPEAT and size > 0:
            c = np.where(outside, np.mod(c, size), c)  # np.mod takes the divisor's sign, as OpSMod does
        elif mode is ClampMode.REPEAT_MIRRORED and size > 1:
            period = 2 * size - 2
            wrapped = np.mod(c, period)
            c = np.where(outside, np.where(wrapped >= size, period - wrapped, wrapped), c)
        else:  # clamping into a dimension of size 0 (or mirroring one of size 1) divides by zero
            undefined |= outside
        tensor_coord[dim] = c
    tensor_coord[:, out_of_bounds | undefined] = 0
    block_size = np.array(layout.block_size, np.int64).reshape(-1, *(1,) * len(shape))
    return tensor_coord // block_size, tensor_coord % block_size, out_of_bounds, undefined


def tensor_coord_to_linear(layout: TensorLayout, block_coord: np.ndarray) -> np.ndarray:
    """blockCoord -> the tensor element index: the sum of blockCoord times stride."""
    return np.tensordot(np.array(layout.stride, np.int64), block_coord, axes=1)


def _view_dimensions(layout: TensorLayout, view: TensorView) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The view's dimensions and strides, or the layout span's (hasDimensions false) with packed strides."""
    if view.has_dimensions:
        return view.dimension, view.stride
    if view.dim != layout.dim:
        raise TensorAddressingError(f"a tensor view without dimensions uses the layout's span, so it needs the "
                                    f"layout's {layout.dim} dimensions; it has {view.dim}")
    stride = [1] * view.dim
    for dim in range(view.dim - 2, -1, -1):
        stride[dim] = stride[dim + 1] * layout.span[dim + 1]
    return layout.span, tuple(stride)


def linear_to_view_coord(layout: TensorLayout, view: TensorView, index) -> np.ndarray:
    """A row-major index within the clip rectangle -> view coordinates, peeling dimensions in permuted order."""
    dimensions, _ = _view_dimensions(layout, view)
    _nonzero("the tensor view's dimensions", [dimensions[p] for p in view.permutation])
    index = _ints(index)
    coord = np.zeros((view.dim, *index.shape), np.int64)
    for dim in range(view.dim - 1, -1, -1):
        i = view.permutation[dim]
        coord[i] = index % dimensions[i]
        index = index // dimensions[i]
    return coord


def view_coord_to_linear(layout: TensorLayout, view: TensorView, view_coord: np.ndarray) -> np.ndarray:
    """View coordinates -> a row-major index within the layout's span, through the view's strides."""
    _, stride = _view_dimensions(layout, view)
    return np.tensordot(np.array(stride, np.int64), view_coord, axes=1)


@dataclass(frozen=True)
class Addresses:
    """Where each element of a matrix goes: its tensor element `index`, the `block_coord` and `coord_in_block` a
    DecodeFunc receives ((LDim, rows, cols)), and which elements are `clipped` by the view (loads leave them
    unmodified, stores skip them) or `out_of_bounds` (loads give the clamp value, stores drop them)."""

    index: np.ndarray
    block_coord: np.ndarray
    coord_in_block: np.ndarray
    clipped: np.ndarray
    out_of_bounds: np.ndarray

    @property
    def accessed(self) -> np.ndarray:
        """The elements read from or written to memory."""
        return ~(self.clipped | self.out_of_bounds)


def tensor_elements(layout: TensorLayout, rows: int, cols: int, view: TensorView | None = None, *,
                    store: bool = False) -> Addresses:
    """matrixCoordToTensorElement (or ...WithView) for every element of a rows x cols matrix."""
    row, col = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return _addresses(layout, row, col, cols, view, store)


def _addresses(layout: TensorLayout, row: np.ndarray, col: np.ndarray, columns: int, view: TensorView | None,
               store: bool) -> Addresses:
    index, clipped = matrix_coord_to_linear(row, col, columns, view)
    if view is not None:
        index = view_coord_to_linear(layout, view, linear_to_view_coord(layout, view, index))
    block, in_block, out_of_bounds, undefined = span_coord_to_tensor_coord(
        layout, linear_to_span_coord(layout, index), store)
    undefined &= ~clipped
    if undefined.any():
        r, c = int(row[undefined].flat[0]), int(col[undefined].flat[0])
        raise TensorAddressingError(f"matrix element ({r}, {c}) of a {'store' if store else 'load'} falls outside "
                                    f"the tensor layout's dimensions {layout.dimension} under clamp mode "
                                    f"{layout.clamp_mode.value}: undefined behaviour")
    out_of_bounds &= ~clipped
    index = np.where(clipped | out_of_bounds, 0, tensor_coord_to_linear(layout, block))
    return Addresses(index, block, in_block, clipped, out_of_bounds)


@dataclass(frozen=True)
class TensorElement:
    """One matrix element's address (`index`, `block_coord`, `coord_in_block`), or None for those when the element
    is `clipped` or `out_of_bounds` (see `Addresses`)."""

    index: int | None
    block_coord: tuple[int, ...] | None
    coord_in_block: tuple[int, ...] | None
    clipped: bool = False
    out_of_bounds: bool = False


def matrix_coord_to_tensor_element(layout: TensorLayout, row: int, col: int, columns: int,
                                   view: TensorView | None = None, *, store: bool = False) -> TensorElement:
    """The specification's matrixCoordToTensorElement(WithView) for element (row, col) of a matrix with `columns`
    columns (its N)."""
    addresses = _addresses(layout, _ints(row), _ints(col), columns, view, store)
    if not addresses.accessed:
        return TensorElement(None, None, None, bool(addresses.clipped), bool(addresses.out_of_bounds))
    return TensorElement(int(addresses.index), tuple(int(b) for b in addresses.block_coord),
                         tuple(int(c) for c in addresses.coord_in_block))
