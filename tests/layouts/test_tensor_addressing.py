"""The numpy model of tensor layouts, tensor views and cooperative-matrix tensor loads and stores, on cases worked by
hand from SPV_NV_tensor_addressing (TA), SPV_NV_cooperative_matrix2 (CM2) and SPV_NV_cooperative_matrix_decode_vector
(DV) in ../shared/spec/; each docstring quotes the paragraph it checks."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import CompileError, TensorAddressingError
from coopnn.layouts.tensor_addressing import (
    ClampMode, TensorLayout, TensorView, matrix_coord_to_tensor_element, tensor_elements)
from coopnn.layouts.tensor_memory import load, store

Q8_0 = np.dtype([("d", "<f2"), ("qs", "i1", 32)])  # llama.cpp's block_q8_0: an f16 scale and 32 int8


def quantize_q8_0(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(blocks row-major over (row, block of 32 columns), the weights they decode to)."""
    rows, cols = weights.shape
    grouped = weights.reshape(rows, cols // 32, 32)
    scale = (np.abs(grouped).max(axis=2) / 127).astype(np.float16)
    quants = np.clip(np.round(grouped / np.maximum(scale[..., None], 1e-4)), -127, 127).astype(np.int8)
    blocks = np.zeros(rows * cols // 32, Q8_0)
    blocks["d"], blocks["qs"] = scale.reshape(-1), quants.reshape(-1, 32)
    decoded = (scale[..., None].astype(np.float32) * quants).astype(np.float16)
    return blocks, decoded.reshape(rows, cols)


def decode_q8_0(memory, index, block_coord, coord_in_block):
    blocks = memory[index]
    quants = blocks["qs"][np.arange(index.size), coord_in_block[1]]
    return (blocks["d"].astype(np.float32) * quants).astype(np.float16)


def grid(rows: int, cols: int, dtype=np.float32) -> np.ndarray:
    """T[r, c] = 100 r + c, so each value names its place."""
    return (100 * np.arange(rows)[:, None] + np.arange(cols)).astype(dtype)


def test_a_created_layout_has_zero_dimensions_strides_spans_offsets_and_unit_blocks():
    """TA OpCreateTensorLayoutNV: "The layoutDimension, stride, span, and offset elements are initialized to zero.
    The blockSize elements are initialized to one. clampValue is initialized to zero." """
    layout = TensorLayout.create(3, ClampMode.CONSTANT)
    assert (layout.dimension, layout.stride, layout.span, layout.offset) == ((0, 0, 0),) * 4
    assert layout.block_size == (1, 1, 1) and layout.clamp_value == 0 and layout.clamp_mode is ClampMode.CONSTANT


@pytest.mark.parametrize("dim", [0, 6])
def test_layouts_and_views_have_one_to_five_dimensions(dim):
    """TA OpTypeTensorLayoutNV: "The value must be greater than zero and less than or equal to 5." """
    with pytest.raises(TensorAddressingError, match="1 to 5 dimensions"):
        TensorLayout.create(dim)
    with pytest.raises(TensorAddressingError, match="1 to 5 dimensions"):
        TensorView.create(dim, True)


def test_set_dimension_sets_the_span_zeroes_the_offset_and_packs_the_strides_in_blocks():
    """TA OpTensorLayoutSetDimensionNV: "setting the layoutDimension and span elements to Dim<i>. Sets offset elements
    to zero. Sets stride[LDim-1] to 1 and sets stride[i] to stride[i+1] * ceiling(Dim<i+1> / blockSize[i+1])." """
    layout = TensorLayout.create(3).set_dimension(2, 3, 4)
    assert layout.dimension == layout.span == (2, 3, 4) and layout.stride == (12, 4, 1)
    blocked = TensorLayout.create(3).set_block_size(1, 1, 32).set_dimension(2, 3, 100)
    assert blocked.stride == (12, 4, 1)  # ceil(100 / 32) = 4 blocks per row
    resliced = layout.slice((1, 1, 1), (1, 2, 3)).set_dimension(5, 6, 7)
    assert resliced.offset == (0, 0, 0) and resliced.span == (5, 6, 7)


def test_operand_counts_must_match_the_dimension():
    """TA OpTensorLayoutSetDimensionNV: "The number of Dim operands must match the dimension of Result Type." """
    with pytest.raises(TensorAddressingError, match="takes 2 operand"):
        TensorLayout.create(2).set_dimension(4, 4, 4)
    with pytest.raises(TensorAddressingError, match="takes 3 operand"):
        TensorView.create(3, True).set_stride(1, 1)


def test_set_stride_may_pad_rows_but_not_overlap_them():
    """TA OpTensorLayoutSetStrideNV: "Stride<i> must be at least Stride<i+1> * ceiling(layoutDimension[i+1] /
    blockSize[i+1])." """
    layout = TensorLayout.create(2).set_block_size(1, 32).set_dimension(4, 100)
    assert layout.set_stride(8, 1).stride == (8, 1)  # rows padded to 8 blocks
    with pytest.raises(TensorAddressingError, match="less than stride 1 times the blocks of dimension 1 \\(4\\)"):
        layout.set_stride(3, 1)


def test_a_slice_adds_to_the_offsets_and_replaces_the_spans():
    """TA OpTensorLayoutSliceNV: "Create a copy of TensorLayout, adding Offset<i> to offset[i], and span[i] is set
    to Span<i>." """
    layout = TensorLayout.create(2).set_dimension(8, 10).slice((2, 3), (4, 5)).slice((1, -1), (2, 2))
    assert layout.offset == (3, 2) and layout.span == (2, 2) and layout.dimension == (8, 10)


def test_the_clamp_value_is_read_as_the_bits_of_the_component_type():
    """TA OpTensorLayoutSetClampValueNV: "setting the clampValue to Value" (CM2: "For load, set result value to
    t.clampValue"); 0xFC00 is float16 -inf, as llama.cpp's flash attention sets it."""
    layout = TensorLayout.create(1, ClampMode.CONSTANT).set_clamp_value(0xFC00)
    assert layout.clamp_value == 0xFC00
    assert np.isneginf(layout.clamp_element(np.float16))
    assert layout.clamp_element(np.uint32) == 0xFC00
    assert layout.set_clamp_value(0x3F800000).clamp_element(np.float32) == 1.0


def test_a_created_view_has_zero_dimensions_and_an_unclipped_region():
    """TA OpCreateTensorViewNV: "The viewDimension and viewStride elements are initialized to zero. The clip values
    are initialized to offsets of 0, spans of 0xFFFFFFFF." """
    view = TensorView.create(2, True, (1, 0))
    assert view.dimension == view.stride == (0, 0)
    assert view.clip == (0, 0xFFFFFFFF, 0, 0xFFFFFFFF) and view.permutation == (1, 0)


def test_view_set_dimension_packs_the_view_strides():
    """TA OpTensorViewSetDimensionNV: "Sets viewStride[LDim-1] to 1 and sets viewStride[i] to the product of
    Dim<i+1> to Dim<LDim-1>." """
    view = TensorView.create(3, True).set_dimension(2, 3, 4)
    assert view.dimension == (2, 3, 4) and view.stride == (12, 4, 1)
    assert view.set_stride(0, 4, 1).stride == (0, 4, 1)
    assert view.set_clip(1, 2, 3, 4).clip == (1, 2, 3, 4)


def test_a_view_permutation_must_permute_its_dimensions():
    """TA OpTypeTensorViewNV: "they must form a valid permutation of the range [0,Dim)." """
    with pytest.raises(TensorAddressingError, match="must permute 0..1"):
        TensorView.create(2, False, (1, 1))


def test_matrix_coordinates_go_through_the_span_into_the_slice():
    """CM2: "This converts the (row,col) into a row-major index, converts that index into an N-dimensional coord
    relative to the span, and uses the span coordinate to compute a location within the tensor." An 8x10 tensor
    sliced at (2, 3) with span 4x5: element (1, 2) is index 1*5+2 = 7, span coordinate (1, 2), tensor coordinate
    (3, 5), element 3*10+5 = 35."""
    layout = TensorLayout.create(2).set_dimension(8, 10).slice((2, 3), (4, 5))
    assert matrix_coord_to_tensor_element(layout, 1, 2, 5).index == 35
    assert matrix_coord_to_tensor_element(layout, 3, 4, 5).index == 57
    tensor = grid(8, 10)
    np.testing.assert_array_equal(load(tensor.reshape(-1), layout, 4, 5), tensor[2:6, 3:8])


def test_a_span_of_another_shape_than_the_matrix_is_walked_in_row_major_order():
    """TA: "Often the span will have the same number of elements as the matrix, but in some more advanced uses that
    may not be the case." A 2x8 matrix over a 4x4 span at (1, 1) of a 6x6 tensor: element (1, 3) is index 11, span
    coordinate (2, 3), tensor coordinate (3, 4), element 22; element (0, 5) is index 5, span (1, 1), element 14."""
    layout = TensorLayout.create(2).set_dimension(6, 6).slice((1, 1), (4, 4))
    assert matrix_coord_to_tensor_element(layout, 1, 3, 8).index == 22
    assert matrix_coord_to_tensor_element(layout, 0, 5, 8).index == 14


def test_a_three_dimensional_span_flattens_pixels_into_rows():
    """CM2 linearToSpanCoord: "spanCoord[dim] = index % t.span[dim]; index /= t.span[dim];" from the last dimension.
    A 4x4x3 image sliced at (1, 1, 0) with span 2x2x3, loaded as 4 pixels x 3 channels: element (3, 2) is index 11,
    span coordinate (1, 1, 2), tensor coordinate (2, 2, 2), element 2*12 + 2*3 + 2 = 32."""
    layout = TensorLayout.create(3).set_dimension(4, 4, 3).slice((1, 1, 0), (2, 2, 3))
    assert matrix_coord_to_tensor_element(layout, 3, 2, 3).index == 32
    image = np.arange(48, dtype=np.float32)
    np.testing.assert_array_equal(load(image, layout, 4, 3), image.reshape(4, 4, 3)[1:3, 1:3].reshape(4, 3))


EDGE_COLUMNS = {  # tensor columns read by matrix columns 0..7 of a 4-wide tensor sliced at column offset -2
    ClampMode.CLAMP_TO_EDGE: [0, 0, 0, 1, 2, 3, 3, 3],
    ClampMode.REPEAT: [2, 3, 0, 1, 2, 3, 0, 1],  # -2 % 4 = 2 as OpSMod computes it
    ClampMode.REPEAT_MIRRORED: [2, 1, 0, 1, 2, 3, 2, 1],  # period 2*4-2 = 6: -2 -> 4 -> 6-4 = 2, 4 -> 2, 5 -> 1
}


@pytest.mark.parametrize("mode", list(EDGE_COLUMNS))
def test_out_of_bounds_loads_clamp_repeat_or_mirror(mode):
    """TA Tensor Clamp Mode: ClampToEdge "clamped to the closest in-bounds coordinate"; Repeat "c = c % dim;";
    RepeatMirrored "c = c % (2*dim-2); c = (c >= dim) ? (2*dim-2-c) : c;". Worked for a 2x4 tensor read as a 2x8
    matrix from column offset -2."""
    layout = TensorLayout.create(2, mode).set_dimension(2, 4).slice((0, -2), (2, 8))
    tensor = grid(2, 4)
    np.testing.assert_array_equal(load(tensor.reshape(-1), layout, 2, 8), tensor[:, EDGE_COLUMNS[mode]])


def test_out_of_bounds_loads_return_the_clamp_value_under_constant():
    """TA Constant: "Out of bounds loads return a constant value." CM2: "For load, set result value to
    t.clampValue"."""
    layout = TensorLayout.create(2, ClampMode.CONSTANT).set_dimension(2, 4).slice((0, -2), (2, 8))
    loaded = load(grid(2, 4).reshape(-1), layout.set_clamp_value(0x40E00000), 2, 8)  # 7.0f
    np.testing.assert_array_equal(loaded[1], [7, 7, 100, 101, 102, 103, 7, 7])
    assert matrix_coord_to_tensor_element(layout, 0, 7, 8).out_of_bounds


def test_out_of_bounds_accesses_under_undefined_are_refused():
    """TA Undefined: "Out of bounds accesses have undefined behavior." The model raises rather than pick a value."""
    layout = TensorLayout.create(2).set_dimension(2, 4).slice((0, 1), (2, 4))
    with pytest.raises(TensorAddressingError, match=r"matrix element \(0, 3\) of a load .* Undefined"):
        load(grid(2, 4).reshape(-1), layout, 2, 4)
    assert issubclass(TensorAddressingError, CompileError)


def test_mirroring_a_dimension_of_one_divides_by_zero():
    """TA RepeatMirrored: "c = c % (2*dim-2);" is a division by zero for dim 1, so undefined."""
    layout = TensorLayout.create(1, ClampMode.REPEAT_MIRRORED).set_dimension(1).slice((0,), (2,))
    with pytest.raises(TensorAddressingError, match="undefined"):
        load(np.ones(1, np.float32), layout, 1, 2)


@pytest.mark.parametrize("mode", [ClampMode.CONSTANT, ClampMode.CLAMP_TO_EDGE, ClampMode.REPEAT,
                                  ClampMode.REPEAT_MIRRORED])
def test_every_clamp_mode_but_undefined_discards_out_of_bounds_stores(mode):
    """CM2 spanCoordToTensorCoord: "For stores, other than Undefined, everything is treated as "discard"". A 2x8 tile
    stored at column offset -2 of a 2x4 tensor writes its columns 2..5 only."""
    layout = TensorLayout.create(2, mode).set_dimension(2, 4).slice((0, -2), (2, 8))
    memory = np.full(8, -1, np.float32)
    store(memory, grid(2, 8), layout)
    np.testing.assert_array_equal(memory.reshape(2, 4), grid(2, 8)[:, 2:6])


def test_a_ragged_batch_tail_loads_zeros_and_stores_only_the_rows_that_exist():
    """TA Constant: "Out of bounds loads return a constant value. Out of bounds stores are discarded." The second
    4-sample tile of a 5-sample batch: row 4 exists, rows 5..7 read the clamp value 0 and are not written back."""
    x = grid(5, 4)
    tile = TensorLayout.create(2, ClampMode.CONSTANT).set_dimension(5, 4).slice((4, 0), (4, 4))
    loaded = load(x.reshape(-1), tile, 4, 4)
    np.testing.assert_array_equal(loaded, np.vstack([x[4:], np.zeros((3, 4), np.float32)]))
    y = np.full(20, -1, np.float32)
    store(y, loaded + 1, tile)
    np.testing.assert_array_equal(y.reshape(5, 4), np.vstack([np.full((4, 4), -1), x[4:] + 1]))


def test_block_coordinates_split_each_coordinate_by_the_block_size():
    """CM2: "coordInBlock[dim] = c % t.blockSize[dim]; blockCoord[dim] = c / t.blockSize[dim];" and TA: "When the
    blockSize is not 1, the strides are considered to be in blocks". With blocks of 1x32 over a 2x64 tensor (strides
    (2, 1)), element (1, 40) is blockCoord (1, 1), coordInBlock (0, 8), block 1*2+1 = 3; in a 3x100 tensor (4 blocks
    a row) element (2, 99) is blockCoord (2, 3), coordInBlock (0, 3), block 11."""
    layout = TensorLayout.create(2).set_block_size(1, 32).set_dimension(2, 64)
    element = matrix_coord_to_tensor_element(layout, 1, 40, 64)
    assert (element.index, element.block_coord, element.coord_in_block) == (3, (1, 1), (0, 8))
    ragged = TensorLayout.create(2).set_block_size(1, 32).set_dimension(3, 100)
    element = matrix_coord_to_tensor_element(ragged, 2, 99, 100)
    assert (element.index, element.block_coord, element.coord_in_block) == (11, (2, 3), (0, 3))


def test_a_decode_function_turns_q8_0_blocks_into_the_matrix():
    """CM2: "The first parameter ... is filled a pointer computed by multiplying the index returned by
    matrixCoordToTensorElement(WithView) by the size of the pointee type. ... The second parameter is filled with the
    blockCoord, and the third parameter with the coordInBlock". Q8_0 weights (3 outputs x 64 inputs, blocks of 32
    inputs) load as W, and through a permuting view as the B matrix W^T."""
    weights = np.random.default_rng(0).uniform(-1, 1, (3, 64)).astype(np.float32)
    blocks, decoded = quantize_q8_0(weights)
    layout = TensorLayout.create(2).set_block_size(1, 32).set_dimension(3, 64)
    assert layout.stride == (2, 1)
    np.testing.assert_array_equal(load(blocks, layout, 3, 64, dtype=np.float16, decode=decode_q8_0), decoded)
    transposing = TensorView.create(2, False, (1, 0))
    b = load(blocks, layout, 64, 3, view=transposing, dtype=np.float16, decode=decode_q8_0)
    np.testing.assert_array_equal(b, decoded.T)
    element = matrix_coord_to_tensor_element(layout, 40, 2, 3, transposing)
    assert (element.index, element.block_coord, element.coord_in_block) == (5, (2, 1), (0, 8))


def test_clipped_elements_keep_the_objects_values():
    """CM2 matrixCoordToLinear with a view: "Load or store is skipped. For load, the matrix element is unmodified."
    A 2x3 tensor loaded into rows 1..2, columns 0..2 of a 4x4 matrix: the clip region is 3 wide (min(N,
    clipColSpan)), so element (2, 1) is index 1*3+1 = 4, tensor element 4."""
    layout = TensorLayout.create(2).set_dimension(2, 3)
    view = TensorView.create(2, False).set_clip(1, 2, 0, 3)
    assert matrix_coord_to_tensor_element(layout, 2, 1, 4, view).index == 4
    assert matrix_coord_to_tensor_element(layout, 1, 3, 4, view).clipped
    loaded = load(grid(2, 3).reshape(-1), layout, 4, 4, view=view, initial=np.full((4, 4), -1, np.float32))
    expected = np.full((4, 4), -1, np.float32)
    expected[1:3, :3] = grid(2, 3)
    np.testing.assert_array_equal(loaded, expected)


def test_an_unbounded_clip_span_keeps_the_row_width_of_the_matrix():
    """CM2: "uint32_t width = min(N, v.clipColSpan);" Clipping column 0 of a 4x4 matrix with the default span keeps
    width 4: element (1, 1) is index 1*4 + 0 = 4, tensor element (1, 0); element (1, 3) is index 6, (1, 2)."""
    layout = TensorLayout.create(2).set_dimension(4, 4)
    view = TensorView.create(2, False).set_clip(0, 0xFFFFFFFF, 1, 0xFFFFFFFF)
    assert matrix_coord_to_tensor_element(layout, 1, 1, 4, view).index == 4
    assert matrix_coord_to_tensor_element(layout, 1, 3, 4, view).index == 6
    assert matrix_coord_to_tensor_element(layout, 1, 0, 4, view).clipped


def test_a_permuted_view_loads_the_transpose():
    """CM2 linearToViewCoord: "uint32_t i = v.permutation[dim]; viewCoord[i] = index % dimensions[i];". With
    permutation (1, 0) over a 3x2 tensor, matrix element (r, c) of the 2x3 matrix peels c off dimension 0 first:
    view coordinate (c, r), so the matrix is the tensor's transpose."""
    tensor = grid(3, 2)
    layout = TensorLayout.create(2).set_dimension(3, 2)
    view = TensorView.create(2, False, (1, 0))
    np.testing.assert_array_equal(load(tensor.reshape(-1), layout, 2, 3, view=view), tensor.T)
    assert matrix_coord_to_tensor_element(layout, 1, 2, 3, view).index == 2 * 2 + 1


def test_view_strides_of_zero_broadcast_a_bias_over_the_rows():
    """TA: "A tensor view allows reinterpreting the dimensions of the region being accessed, including changing the
    number of dimensions"; CM2 viewCoordToLinear: "index += viewCoord[dim] * stride[dim];". A 1-D bias of 4 through
    a 3x4 view with strides (0, 1): element (r, c) is view coordinate (r, c), span index c."""
    bias = np.array([1, 2, 3, 4], np.float32)
    layout = TensorLayout.create(1).set_dimension(4)
    view = TensorView.create(2, True).set_dimension(3, 4).set_stride(0, 1)
    np.testing.assert_array_equal(load(bias, layout, 3, 4, view=view), np.tile(bias, (3, 1)))


def test_a_view_without_dimensions_uses_the_layouts_span_so_needs_its_rank():
    """CM2 linearToViewCoord: "auto &dimensions = v.hasDimensions ? v.viewDimension : t.span;" """
    with pytest.raises(TensorAddressingError, match="needs the layout's 2 dimensions; it has 1"):
        load(np.zeros(4, np.float32), TensorLayout.create(2).set_dimension(2, 2), 2, 2,
             view=TensorView.create(1, False))


def test_stores_refuse_blocks_and_elements_that_collide():
    """CM2: "a block size larger than 1 must not be used with OpCooperativeMatrixStoreTensorNV because it will lead
    to data races." Two matrix elements stored to one tensor element race the same way."""
    blocked = TensorLayout.create(2).set_block_size(1, 2).set_dimension(2, 4)
    with pytest.raises(TensorAddressingError, match="block sizes \\(1, 2\\) lead to data races"):
        store(np.zeros(8, np.float32), grid(2, 4), blocked)
    broadcast = TensorView.create(2, True).set_dimension(3, 4).set_stride(0, 1)
    with pytest.raises(TensorAddressingError, match="several matrix elements map to one tensor element"):
        store(np.zeros(4, np.float32), grid(3, 4), TensorLayout.create(1).set_dimension(4), view=broadcast)


def test_loads_check_the_memory_they_read():
    """CM2: "This index is then multiplied by the size of the component type of the matrix and treated as a byte
    offset from the Pointer operand": the memory holds the component type, and every index lands inside it."""
    layout = TensorLayout.create(2).set_dimension(4, 4)
    with pytest.raises(TensorAddressingError, match="past the end of the memory"):
        load(np.zeros(15, np.float32), layout, 4, 4)
    with pytest.raises(TensorAddressingError, match="memory holds the matrix's component type"):
        load(np.zeros(16, np.float16), layout, 4, 4, initial=np.zeros((4, 4), np.float32))
    with pytest.raises(TensorAddressingError, match="1-D array"):
        load(np.zeros((4, 4), np.float32), layout, 4, 4)


def test_the_decode_vector_function_decodes_whole_groups_and_the_scalar_function_the_rest():
    """DV: "the V matrix elements covered by the invocation are V matrix elements whose tensor coordinates ... share
    the same blockCoord and the same coordInBlock values in every dimension except LDim-1, and whose
    coordInBlock[LDim-1] values are V consecutive integers starting at a multiple of V. The blockCoord,
    coordInBlock, and pointer arguments passed to the invocation are those for the element of the group with the
    lowest coordInBlock[LDim-1]." Columns 4..43 of 3x64 Q8_0 weights: columns 8..39 form 3x4 groups of 8, the 4
    columns at each end are decoded one by one."""
    blocks, decoded = quantize_q8_0(np.random.default_rng(1).uniform(-1, 1, (3, 64)).astype(np.float32))
    layout = TensorLayout.create(2).set_block_size(1, 32).set_dimension(3, 64).slice((0, 4), (3, 40))
    calls = {"vector": [], "scalar": 0}

    def decode_x8(memory, index, block_coord, coord_in_block):
        calls["vector"].append(coord_in_block[1].copy())
        quants = memory[index]["qs"][np.arange(index.size)[:, None], coord_in_block[1][:, None] + np.arange(8)]
        return (memory[index]["d"][:, None].astype(np.float32) * quants).astype(np.float16)

    def decode_counted(memory, index, block_coord, coord_in_block):
        calls["scalar"] += index.size
        return decode_q8_0(memory, index, block_coord, coord_in_block)

    loaded = load(blocks, layout, 3, 40, dtype=np.float16, decode=decode_counted, decode_vector=(8, decode_x8))
    np.testing.assert_array_equal(loaded, decoded[:, 4:44])
    (starts,) = calls["vector"]
    assert sorted(starts.tolist()) == sorted([8, 16, 24, 0] * 3) and calls["scalar"] == 3 * 8  # 32..39: block 1
    with pytest.raises(TensorAddressingError, match="DecodeVectorFunc needs DecodeFunc"):
        load(blocks, layout, 3, 40, dtype=np.float16, decode_vector=(8, decode_x8))
    with pytest.raises(TensorAddressingError, match="last block size \\(32\\) must be a multiple"):
        load(blocks, layout, 3, 40, dtype=np.float16, decode=decode_q8_0, decode_vector=(3, decode_x8))


def test_slices_load_and_store_what_numpy_slicing_selects():
    """TA Figure "A 2D tensor layout, and a slice selecting a region within it": every in-bounds slice of a random
    tensor loads as the numpy slice and stores back in place."""
    rng = np.random.default_rng(2)
    for _ in range(50):
        shape = tuple(int(n) for n in rng.integers(1, 9, 2))
        offsets = [int(rng.integers(0, n)) for n in shape]
        spans = [int(rng.integers(1, n - o + 1)) for n, o in zip(shape, offsets)]
        tensor = rng.standard_normal(shape).astype(np.float32)
        layout = TensorLayout.create(2).set_dimension(*shape).slice(offsets, spans)
        region = (slice(offsets[0], offsets[0] + spans[0]), slice(offsets[1], offsets[1] + spans[1]))
        loaded = load(tensor.reshape(-1), layout, *spans)
        np.testing.assert_array_equal(loaded, tensor[region])
        memory = np.zeros(tensor.size, np.float32)
        store(memory, loaded, layout)
        expected = np.zeros(shape, np.float32)
        expected[region] = tensor[region]
        np.testing.assert_array_equal(memory.reshape(shape), expected)


def test_tensor_elements_report_every_elements_address():
    """CM2: "an element index is computed according to the matrixCoordToTensorElement function for each (row,col)
    of the matrix, which has M rows and N columns." """
    layout = TensorLayout.create(2, ClampMode.CONSTANT).set_dimension(3, 3).slice((1, 1), (2, 3))
    addresses = tensor_elements(layout, 2, 3)
    np.testing.assert_array_equal(addresses.index, [[4, 5, 0], [7, 8, 0]])
    np.testing.assert_array_equal(addresses.out_of_bounds, [[False, False, True], [False, False, True]])
    assert not addresses.clipped.any()
