"""The coopmat2 kernel as steps: what a work-group does with its tile of samples, in order, every tensor layout and
view spelled out. The target emits SPIR-V from the steps (`target.py`), `text.py` prints them in the tensor
language's syntax, and the tests run them in numpy through the tensor-addressing model
(`coopnn.layouts.tensor_memory`): one description read three ways.

The tile's samples are the rows of workgroup-scope matrices: the input is loaded as a float32 accumulator (rows past
the batch and columns past the features read 0: clamp mode Constant), converted to the float16 A matrix of the first
product; each layer's weights (rows x columns, row-major) are its B matrix, W transposed by a view and padded with
zeros past the matrix: float16 elements, or blocks of a block format (q8_0, q4_0) that the load decodes to float16
(the layout counts blocks of (1, block size); `decode.py`); its bias (float16, or float32 for a block format: the
format's vectors) is broadcast over the rows by a view of strides (0, 1) and becomes the accumulator the product
adds to; a stage's epilogue is a per-element operation; the last value is stored through a
layout that drops the rows past the batch and the padding columns. Feature dimensions are padded to whole
`granularity` (the flexible-dimension granularity); the tile's rows are the work-group's invocations.

Step results are the kernel program's value names where they hold one (a product, a stage's result) and capitalised
or lettered names that no kernel value or parameter takes otherwise (A1, B1, C1, bias1, y1). Layout operands are ints
or named run-time values: "n", the samples of the dispatch (push constant `count`), and "i",
the tile's first sample (work-group index times the tile).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import align_up
from coopnn.layouts.tensor_addressing import ClampMode, TensorLayout, TensorView
from coopnn.shaders.targets.tile_plan import TilePlan
from coopnn.shaders.targets.tile_text import matrix_type

Operand = int | str
A, B, ACCUMULATOR = "MatrixAKHR", "MatrixBKHR", "MatrixAccumulatorKHR"
COMPONENTS = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32"}  # of the formats' vectors


def _resolve(operand: Operand, values: Mapping[str, int]) -> int:
    return values[operand] if isinstance(operand, str) else operand


@dataclass(frozen=True)
class Layout:
    """OpCreateTensorLayoutNV with clamp mode Constant (clamp value 0), OpTensorLayoutSetBlockSizeNV where `block`
    is given (strides then count blocks), OpTensorLayoutSetDimensionNV (packed strides) and
    OpTensorLayoutSliceNV."""

    dimension: tuple[Operand, ...]
    offset: tuple[Operand, ...]
    span: tuple[int, ...]
    block: tuple[int, ...] | None = None

    def numpy(self, values: Mapping[str, int]) -> TensorLayout:
        layout = TensorLayout.create(len(self.dimension), ClampMode.CONSTANT)
        if self.block is not None:
            layout = layout.set_block_size(*self.block)
        layout = layout.set_dimension(*(_resolve(d, values) for d in self.dimension))
        return layout.slice(tuple(_resolve(o, values) for o in self.offset), self.span)


@dataclass(frozen=True)
class View:
    """OpCreateTensorViewNV: without `dimension`, the layout's span read in `permutation` order; with it (and
    `stride`), the matrix indexes those dimensions and strides."""

    permutation: tuple[int, ...] = (0, 1)
    dimension: tuple[int, ...] | None = None
    stride: tuple[int, ...] | None = None

    def numpy(self) -> TensorView:
        view = TensorView.create(len(self.permutation), self.dimension is not None, self.permutation)
        if self.dimension is not None:
            view = view.set_dimension(*self.dimension).set_stride(*self.stride)
        return view


@dataclass(frozen=True)
class MatrixType:
    """A workgroup-scope cooperative matrix type."""

    component: str  # "f16" or "f32"
    rows: int
    cols: int
    use: str  # A, B or ACCUMULATOR

    def __str__(self) -> str:
        return matrix_type(self.component, self.rows, self.cols, self.use)


@dataclass(frozen=True)
class Load:
    """OpCooperativeMatrixLoadTensorNV of kernel parameter `param` (input, matrix or vector); a matrix of a block
    format names it in `decode` (its DecodeFunc gives each element) and, where the DecodeVectorFunc is emitted too,
    that function's width in `decode_vector`."""

    result: str
    type: MatrixType
    param: str
    layout: Layout
    view: View | None = None
    decode: str | None = None
    decode_vector: int | None = None


@dataclass(frozen=True)
class Convert:
    """A change of component type and/or use (Op*Convert, OpCooperativeMatrixConvertNV); float16 results round to
    nearest even."""

    result: str
    type: MatrixType
    source: str


@dataclass(frozen=True)
class MulAdd:
    """OpCooperativeMatrixMulAddKHR: a x b + c (c None: zero)."""

    result: str
    type: MatrixType
    a: str
    b: str
    c: str | None


@dataclass(frozen=True)
class Apply:
    """OpCooperativeMatrixPerElementOpNV running stage `stage` of the plan on each element (its start rounded to
    float16, then its epilogue); elements of columns from `mask` on become 0 (None: none), and the result is rounded
    to float16 where `round_result` (the output)."""

    result: str
    type: MatrixType
    source: str
    stage: int
    mask: int | None
    round_result: bool


@dataclass(frozen=True)
class Store:
    """OpCooperativeMatrixStoreTensorNV into the output parameter `param`; out-of-bounds elements are dropped."""

    source: str
    param: str
    layout: Layout


Step = Load | Convert | MulAdd | Apply | Store


@dataclass(frozen=True)
class TileKernel:
    plan: TilePlan
    tile: int  # samples per work-group, one per invocation
    granularity: int  # feature dimensions are padded to whole multiples of it
    steps: tuple[Step, ...]


def tile_kernel(plan: TilePlan, tile: int, granularity: int, weights: WeightFormat,
                decode_vector: int | None = None) -> TileKernel:
    """The steps of `plan` for tiles of `tile` samples, weights stored in `weights` (float16 or a block format);
    `decode_vector`: the width of the block format's DecodeVectorFunc, where the loads name one."""
    blocks = weights.blocks
    bias_component = COMPONENTS[weights.vectors.storage]
    stages = plan.stages
    features = plan.input.shape[0]
    width = align_up(features, granularity)
    value = stages[0].source
    steps: list[Step] = [Load(value, MatrixType("f32", tile, width, ACCUMULATOR), plan.input.name,
                              Layout(("n", features), ("i", 0), (tile, width)))]
    for index, stage in enumerate(stages):
        columns, width = width, align_up(stage.width, granularity)
        accumulator = MatrixType("f32", tile, width, ACCUMULATOR)
        if stage.matrix is not None:
            a, b, c = f"A{index}", f"B{index}", None
            steps.append(Convert(a, MatrixType("f16", tile, columns, A), value))
            block, stored_columns = None, stage.columns
            if blocks is not None:
                # a row holds whole blocks (zeros past the matrix), and the column dimension says so: the spec
                # rounds a partial block up when it packs strides, but on the H100 (driver 580) every model with an
                # input width that is not whole blocks, and the one-hot decode test, came out wrong
                block, stored_columns = (1, blocks.size), -(-stage.columns // blocks.size) * blocks.size
            steps.append(Load(b, MatrixType("f16", columns, width, B), stage.matrix,
                              Layout((stage.width, stored_columns), (0, 0), (width, columns), block), View((1, 0)),
                              None if blocks is None else weights.name, decode_vector))
            if stage.bias is not None:
                c = f"C{index}"
                bias = Layout((stage.width,), (0,), (width,))
                broadcast = View((0, 1), (tile, width), (0, 1))
                if bias_component == "f32":
                    steps.append(Load(c, accumulator, stage.bias, bias, broadcast))
                else:
                    steps.append(Load(f"bias{index}", MatrixType(bias_component, tile, width, ACCUMULATOR),
                                      stage.bias, bias, broadcast))
                    steps.append(Convert(c, accumulator, f"bias{index}"))
            value = stage.source
            steps.append(MulAdd(value, accumulator, a, b, c))
        last = index == len(stages) - 1
        if stage.epilogue or last:
            # padding columns meet zero weights in the next product, harmless unless the epilogue makes them inf/NaN
            mask = None if last or width == stage.width or stage.finite_at_zero(plan.constants) else stage.width
            result = stage.result if stage.result != value else f"y{index}"
            # without an epilogue the start's rounding is the output's
            steps.append(Apply(result, accumulator, value, index, mask, last and bool(stage.epilogue)))
            value = result
    steps.append(Store(value, plan.output.name, Layout(("n", plan.output.shape[0]), ("i", 0), (tile, width))))
    return TileKernel(plan, tile, granularity, tuple(steps))
