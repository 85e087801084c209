"""Cooperative-matrix tensor loads and stores in numpy: OpCooperativeMatrixLoadTensorNV (with its Object, DecodeFunc
and DecodeVectorFunc operands) and OpCooperativeMatrixStoreTensorNV, on a 1-D numpy array standing for the memory at
the Pointer operand: its elements are the matrix's component type, or a decode function's pointee type (a structured
dtype for a block format). Addresses come from tensor_addressing.py; what the specifications leave undefined raises
`TensorAddressingError`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from coopnn.errors import TensorAddressingError
from coopnn.layouts.tensor_addressing import Addresses, TensorLayout, TensorView, tensor_elements

DECODE_VECTOR_WIDTHS = (2, 4, 8)

# decode(memory, index, block_coord, coord_in_block) -> values: the DecodeFunc of a load, vectorised over the n
# elements it decodes; `index` (n,) points into `memory`, the coordinates are (LDim, n). A DecodeVectorFunc takes the
# same arguments for n groups and returns (n, V) values.
DecodeFunction = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _memory(memory: np.ndarray, addresses: Addresses, operation: str) -> None:
    if memory.ndim != 1:
        raise TensorAddressingError(f"{operation}: the memory is a 1-D array of elements; got shape {memory.shape}")
    used = addresses.index[addresses.accessed]
    if used.size and used.max() >= memory.size:
        raise TensorAddressingError(f"{operation}: tensor element {int(used.max())} is past the end of the memory "
                                    f"({memory.size} elements)")


def load(memory: np.ndarray, layout: TensorLayout, rows: int, cols: int, *, view: TensorView | None = None,
         initial: np.ndarray | None = None, dtype=None, decode: DecodeFunction | None = None,
         decode_vector: tuple[int, DecodeFunction] | None = None) -> np.ndarray:
    """OpCooperativeMatrixLoadTensorNV of a rows x cols matrix. `initial` is the Object operand: clipped elements
    keep its values, and its dtype is the matrix's component type; without it, zeros of `dtype` (by default the
    memory's). Without `decode` the memory holds the component type; with it, `decode` gives each accessed
    element's value. `decode_vector` = (V, function) decodes each whole
    group of V block-adjacent elements in one call, and the scalar `decode` the rest, as an implementation may."""
    addresses = tensor_elements(layout, rows, cols, view)
    _memory(memory, addresses, "OpCooperativeMatrixLoadTensorNV")
    if initial is not None:
        result = np.array(initial, copy=True)
        if result.shape != (rows, cols):
            raise TensorAddressingError(f"the load's Object is {result.shape}, the matrix {(rows, cols)}")
    elif dtype is None and decode is not None:
        raise TensorAddressingError("a load with a decode function needs the matrix's component type: dtype=")
    else:
        result = np.zeros((rows, cols), memory.dtype if dtype is None else dtype)
    accessed = addresses.accessed
    if decode is None:
        if decode_vector is not None:
            raise TensorAddressingError("DecodeVectorFunc needs DecodeFunc on the same load")
        if memory.dtype != result.dtype:
            raise TensorAddressingError(f"without a decode function the memory holds the matrix's component type "
                                        f"({result.dtype}); it holds {memory.dtype}")
        result[accessed] = memory[addresses.index[accessed]]
    else:
        values = np.empty(int(accessed.sum()), result.dtype)
        scalar = np.ones(values.shape, bool)
        if decode_vector is not None:
            scalar = _decode_groups(memory, layout, addresses, accessed, decode_vector, values)
        if scalar.any():
            values[scalar] = decode(memory, addresses.index[accessed][scalar],
                                    addresses.block_coord[:, accessed][:, scalar],
                                    addresses.coord_in_block[:, accessed][:, scalar])
        result[accessed] = values
    result[addresses.out_of_bounds] = layout.clamp_element(result.dtype)
    return result


def _decode_groups(memory: np.ndarray, layout: TensorLayout, addresses: Addresses, accessed: np.ndarray,
                   decode_vector: tuple[int, DecodeFunction], values: np.ndarray) -> np.ndarray:
    """Fills `values` (the accessed elements in order) for every complete group of V elements: same blockCoord,
    same coordInBlock but in the last dimension, where they are V consecutive integers from a multiple of V. The
    function gets the lowest element's arguments. Returns the mask of elements left to the scalar DecodeFunc."""
    width, function = decode_vector
    if width not in DECODE_VECTOR_WIDTHS or layout.block_size[-1] % width:
        raise TensorAddressingError(f"DecodeVectorFunc returns {'/'.join(map(str, DECODE_VECTOR_WIDTHS))} "
                                    f"components and the last block size ({layout.block_size[-1]}) must be a "
                                    f"multiple of them; got {width}")
    block, in_block = addresses.block_coord[:, accessed], addresses.coord_in_block[:, accessed].copy()
    lane = in_block[-1] % width
    in_block[-1] -= lane
    groups, first, member = np.unique(np.concatenate([block, in_block]), axis=1, return_index=True,
                                      return_inverse=True)
    member = member.reshape(-1)
    lanes = np.zeros(groups.shape[1], np.int64)
    np.bitwise_or.at(lanes, member, 1 << lane)
    complete = lanes == (1 << width) - 1
    chosen = np.nonzero(complete)[0]
    if chosen.size:
        index = addresses.index[accessed][first[chosen]]
        decoded = np.asarray(function(memory, index, groups[:layout.dim, chosen], groups[layout.dim:, chosen]))
        grouped = complete[member]
        position = np.full(groups.shape[1], -1)
        position[chosen] = np.arange(chosen.size)
        values[grouped] = decoded[position[member[grouped]], lane[grouped]]
    return ~complete[member]


def store(memory: np.ndarray, matrix: np.ndarray, layout: TensorLayout, *, view: TensorView | None = None) -> None:
    """OpCooperativeMatrixStoreTensorNV into `memory` (a 1-D array of the matrix's component type), in place.
    Clipped and out-of-bounds elements are not written; block sizes above 1 are not allowed (data races)."""
    if any(b != 1 for b in layout.block_size):
        raise TensorAddressingError(f"OpCooperativeMatrixStoreTensorNV: block sizes {layout.block_size} lead to data "
                                    f"races; stores need block size 1")
    if memory.dtype != matrix.dtype:
        raise TensorAddressingError(f"a store writes the matrix's component type ({matrix.dtype}) into memory of "
                                    f"that type; got {memory.dtype}")
    addresses = tensor_elements(layout, *matrix.shape, view, store=True)
    _memory(memory, addresses, "OpCooperativeMatrixStoreTensorNV")
    written = addresses.index[addresses.accessed]
    if np.unique(written).size != written.size:
        raise TensorAddressingError("OpCooperativeMatrixStoreTensorNV: several matrix elements map to one tensor "
                                    "element; which one lands is undefined")
    memory[written] = matrix[addresses.accessed]
