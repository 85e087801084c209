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

A plan with a per-sample input stage (an encoding, say: `TilePlan.input_stage`) has each invocation run it for its
sample first (`coopnn.shaders.targets.tile_input`) and write the float16 row into `STAGED`, a workgroup-memory array
of tile x stage 0's width; the first load reads that instead of the input (columns past the width read 0).

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
# Feature dimensions wider than this are split into blocks of it: a layer's product is a sum of block products, each
# matrix at most TILE x BLOCK. Why: whole 128-wide layers (a 64 x 128 float32 accumulator and a 128 x 128 B matrix
# over 64 invocations) ran about three times slower than blocks of 64 at large batches
# (`bench/results/nvidia-h100-80gb-hbm3-2026-11-25-tile-targets.md` against `...-2026-11-27-coopmat2-blocked.md`);
# 64-wide models are one block and unchanged.
BLOCK = 64
STAGED = "staged"  # the workgroup-memory rows of a per-sample input stage, which the first load reads


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
    vectors: str = "f16"  # the component the weight format stores vectors in (biases, an encoding's parameters)


def _blocks(width: int, block: int) -> list[tuple[int, int]]:
    """(first column, columns) of each block of a padded width."""
    return [(first, min(block, width - first)) for first in range(0, width, block)]


def _named(name: str, *index: int, single: bool) -> str:
    """A value's name, or its block's (`name_j`, `name_k_n`) where the value is split into blocks."""
    return name if single else "_".join([name, *map(str, index)])


def tile_kernel(plan: TilePlan, tile: int, granularity: int, weights: WeightFormat,
                decode_vector: int | None = None, block: int = BLOCK) -> TileKernel:
    """The steps of `plan` for tiles of `tile` samples, weights stored in `weights` (float16 or a block format);
    `decode_vector`: the width of the block format's DecodeVectorFunc, where the loads name one. Feature dimensions
    wider than `block` (a multiple of `granularity`) are split into blocks of it (`BLOCK`)."""
    blocks = weights.blocks
    bias_component = COMPONENTS[weights.vectors.storage]
    stages = plan.stages
    features = stages[0].width
    width = align_up(features, granularity)
    pieces = _blocks(width, block)
    values = [_named(stages[0].source, j, single=len(pieces) == 1) for j in range(len(pieces))]
    if plan.input_stage:
        steps: list[Step] = [Load(value, MatrixType("f16", tile, span, ACCUMULATOR), STAGED,
                                  Layout((tile, features), (0, first), (tile, span)))
                             for value, (first, span) in zip(values, pieces)]
    else:
        steps = [Load(value, MatrixType("f32", tile, span, ACCUMULATOR), plan.input.name,
                      Layout(("n", features), ("i", first), (tile, span)))
                 for value, (first, span) in zip(values, pieces)]
    for index, stage in enumerate(stages):
        width = align_up(stage.width, granularity)
        inputs, pieces = pieces, _blocks(width, block)
        single = len(inputs) == 1 and len(pieces) == 1
        last = index == len(stages) - 1
        # padding columns meet zero weights in the next product, harmless unless the epilogue makes them inf/NaN
        mask = None if last or width == stage.width or stage.finite_at_zero(plan.constants) else stage.width

        def finish(n: int, value: str, first: int, span: int) -> str:
            """The stage's per-element operation on output block n (`value`), where it has one; what it hands on."""
            if not (stage.epilogue or last):
                return value
            result = _named(stage.result if stage.result != stage.source else f"y{index}", n, single=len(pieces) == 1)
            inside = None if mask is None or mask >= first + span else max(mask - first, 0)
            # without an epilogue the start's rounding is the output's
            steps.append(Apply(result, MatrixType("f32", tile, span, ACCUMULATOR), value, index, inside,
                               last and bool(stage.epilogue)))
            return result

        if stage.matrix is None:
            values = [finish(n, value, first, span) for n, (value, (first, span)) in enumerate(zip(values, pieces))]
            continue
        a = [_named(f"A{index}", k, single=single) for k in range(len(inputs))]
        steps += [Convert(name, MatrixType("f16", tile, span, A), value)
                  for name, value, (_, span) in zip(a, values, inputs)]
        block_size, stored_columns = None, stage.columns
        if blocks is not None:
            # a row holds whole blocks (zeros past the matrix), and the column dimension says so: the spec rounds a
            # partial block up when it packs strides, but on the H100 (driver 580) every model with an input width
            # that is not whole blocks, and the one-hot decode test, came out wrong
            block_size, stored_columns = (1, blocks.size), -(-stage.columns // blocks.size) * blocks.size
        values = []
        for n, (first, span) in enumerate(pieces):
            accumulator = MatrixType("f32", tile, span, ACCUMULATOR)
            b = [_named(f"B{index}", k, n, single=single) for k in range(len(inputs))]
            steps += [Load(name, MatrixType("f16", depth, span, B), stage.matrix,
                           Layout((stage.width, stored_columns), (first, start), (span, depth), block_size),
                           View((1, 0)), None if blocks is None else weights.name, decode_vector)
                      for name, (start, depth) in zip(b, inputs)]
            c = None
            if stage.bias is not None:
                c = _named(f"C{index}", n, single=single)
                bias = Layout((stage.width,), (first,), (span,))
                broadcast = View((0, 1), (tile, span), (0, 1))
                if bias_component == "f32":
                    steps.append(Load(c, accumulator, stage.bias, bias, broadcast))
                else:
                    loaded = _named(f"bias{index}", n, single=single)
                    steps.append(Load(loaded, MatrixType(bias_component, tile, span, ACCUMULATOR), stage.bias,
                                      bias, broadcast))
                    steps.append(Convert(c, accumulator, loaded))
            value = _named(stage.source, n, single=len(pieces) == 1)
            for k in range(len(inputs)):
                # the sum over the input's blocks in ascending order, each partial sum the next one's addend
                result = value if k == len(inputs) - 1 else _named(f"P{index}", k, n, single=False)
                steps.append(MulAdd(result, accumulator, a[k], b[k], c))
                c = result
            values.append(finish(n, value, first, span))
    steps += [Store(value, plan.output.name, Layout(("n", plan.output.shape[0]), ("i", first), (tile, span)))
              for value, (first, span) in zip(values, pieces)]
    return TileKernel(plan, tile, granularity, tuple(steps), bias_component)
