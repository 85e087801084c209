"""Weight gradients as matrix products of the tape on cooperative matrices (VK_KHR_cooperative_matrix).

Layer l's weight gradient is Delta_l^T (rows x samples) times Input_l (samples x cols), a matrix product whose long
dimension is the batch. One subgroup of 32 invocations takes one block of one layer's gradient, up to `ROW_TILES`
16-row tiles (`WIDE_ROW_TILES` in layers of at least `WIDE_LAYER_ROWS` rows) by `MAX_COLUMN_TILES` 16-column tiles,
over one chunk of `chunk_tiles` x 16 samples: per 16 samples it loads the 16 x 16 delta tile of each row tile (a
row-major load where the tape keeps deltas feature-major, a column-major one where it keeps them sample-major:
`TapeLayout.deltas`) and the 16 x 16 input tile of each column tile, and multiplies-and-adds every pair in float32
accumulators (16x16x16, float16 operands, the combination the H100 lists). The product with a constant matrix of
ones gives the bias gradients in every column, made by the blocks of a layer's first column tiles. Tiles go through
workgroup memory to the chunk's partial gradients, keeping only rows and columns inside the layer (padded shapes are
whole 8s, not 16s); `partial_sum_shader` adds the chunks.

The shader holds one copy of the block's code per layer, the block's first row and column computed from the task
number, because a copy per block made the shader grow with the model and slowed wide layers down.

Blocks of `STAGED_FROM_ROW_TILES` row tiles or more stage each 16 samples' tiles through workgroup memory: the subgroup
copies the block's inputs (16 samples x its columns, contiguous for each sample) and, where the tape keeps deltas
sample-major, its deltas into two arrays of 16-byte elements, consecutive lanes on consecutive addresses, and loads the
A and B tiles from there; a 16 x 16 tile loaded from device memory has each lane read parts of rows a layer apart.
The tape then needs its regions to start on 8-half boundaries (widths and capacity multiples of 8, as sessions make
them).

A subgroup's 16-sample steps wait on their loads from device memory, so the kernel needs many subgroups at once:
`coopmat_blocks.chunking` halves the chunk (from `MAX_CHUNK_TILES` tiles down to `MIN_CHUNK_TILES`) until a batch's
chunks give at least `TARGET_SUBGROUPS` subgroups; `most_chunks` bounds the partial gradients a capacity needs. With
`Tuning.gradient_subgroups` of more than one, a work-group of that many subgroups shares one block of one chunk, its
subgroups taking the chunk's 16-sample tiles in turn (each staging into its own part of the arrays, behind subgroup
barriers), and writes the sum of their accumulators: more subgroups load at once for the same partial gradients.

Every partial gradient it writes that is not finite sets the training state's status word (binding 2), so the
optimizer, which adds the partials itself, knows before it starts whether the step is skipped. Each invocation adds
the partials it writes and checks that one sum at the end: the tape is float16, so its finite products summed in
float32 stay below 65504^2 times 2^32 samples, and a sum is finite exactly when its terms are; checking each partial
as it was written cost more.

Bindings: 0 tape (f16), 1 partials (f32, written), 2 the training state words (u32). Push: `count` (32 x tasks),
`batch` (samples on the tape, padding zero), `capacity`, `parameters` (elements of one chunk's partial gradients),
`chunk_tiles`. Dispatch (tasks, chunks, 1) workgroups.
The tape needs `TILE` rows of capacity after its last region: a tile of a layer whose rows are not a multiple of 16
reads (and discards) rows past its region, or features past its sample's.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from coopnn.shaders.targets.base import Binary, ShaderFrame, push_constant_block
from coopnn.shaders.training.gradients import FEATURES as STATUS_FEATURES, flag_nonfinite
from coopnn.shaders.training.indices import Indices
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.shaders.training.shader import HALVES_PER_WORD, storage_buffer, training_kernel, word_type, word_view
from coopnn.shaders.training.tuning import DEFAULT, Tuning
from coopnn.shaders.training.coopmat_blocks import MAX_COLUMN_TILES, SUBGROUP, TILE, LayerBlocks, tuned_blocks

TAPE, PARTIALS, STATUS = range(3)
# Blocks of at least this many row tiles stage their tape tiles through workgroup memory: faster for the 4 x 4 blocks
# of 128-row layers, slower for smaller blocks (bench/results/nvidia-h100-80gb-hbm3-2026-11-27-tiled-step-ablation.md).
STAGED_FROM_ROW_TILES = 4
STAGE_PAD = 8  # halves past a staged row: the rows of a tile start on different banks
FEATURES = frozenset({"cooperativeMatrix", "shaderFloat16", "storageBuffer16BitAccess", "vulkanMemoryModel"}
                     | STATUS_FEATURES)


def coopmat_gradient_shader(parameters: ParameterLayout, tape: TapeLayout, tuning: Tuning = DEFAULT) -> Binary:
    """The kernel for `parameters` and `tape`, its blocks, staging and subgroups as `tuning` sets them."""
    kernel = GradientKernel(parameters, tape, tuned_blocks(parameters, tuning), tuning)
    for blocks in kernel.blocks:
        kernel.layer(blocks)
    return kernel.finish()


@dataclass
class Block:
    """What a subgroup's block of one layer's gradient reads: its layer, its first row `m0` and column `k0`, which of
    its tiles lie inside the layer (None: all of them do), its accumulators, and where its tape tiles start."""

    blocks: LayerBlocks
    layer: object
    m0: object
    k0: object
    row_inside: list
    col_inside: list
    with_bias: object
    products: list
    sums: list
    staged: bool  # its tape tiles go through workgroup memory
    delta_base: object = None
    inputs: object = None

    @property
    def input_row(self) -> int:
        """Elements a staged sample's inputs take."""
        return (self.blocks.column_tiles * TILE + STAGE_PAD) // HALVES_PER_WORD

    @property
    def delta_row(self) -> int:
        """Elements a staged sample's deltas take."""
        return (self.blocks.row_tiles * TILE + STAGE_PAD) // HALVES_PER_WORD


class GradientKernel:
    """The module of `coopmat_gradient_shader` as it is built: its buffers, types and the values every block reads."""

    def __init__(self, parameters: ParameterLayout, tape: TapeLayout, blocks: list[LayerBlocks],
                 tuning: Tuning = DEFAULT):
        self.parameters, self.tape, self.blocks = parameters, tape, blocks
        self.subgroups, self.staged_always = tuning.gradient_subgroups, tuning.staged
        self.push = push_constant_block(("count", "u32"), ("batch", "u32"), ("capacity", "u32"),
                                        ("parameters", "u32"), ("chunk_tiles", "u32"))
        self.frame = frame = ShaderFrame((), 32, SUBGROUP * self.subgroups, push_constants=self.push)
        self.m, self.fn, self.u32, self.f32 = frame.module, frame.main, frame.u32, frame.f32
        self.ix = Indices(frame)
        self.ops = self.ix.ops
        m, f32 = self.m, self.f32
        self.f16 = m.type_float(16)
        storage_buffer(frame, TAPE, self.f16, writable=False, name="tape")
        storage_buffer(frame, PARTIALS, f32, writable=True, name="partials")
        storage_buffer(frame, STATUS, self.u32, writable=True, name="state")
        self.tile_memory = m.global_variable("Workgroup", m.type_array(f32, m.constant(
            self.u32, TILE * TILE * self.subgroups)), name="tile")
        if any(self.is_staged(b) for b in blocks):
            self._staging()
        self.a_type, self.b_type, self.c_type = (self.matrix(self.f16, "MatrixAKHR"),
                                                 self.matrix(self.f16, "MatrixBKHR"),
                                                 self.matrix(f32, "MatrixAccumulatorKHR"))
        self.row_major = m.enum_constant("CooperativeMatrixLayout", "RowMajorKHR")
        self.column_major = m.enum_constant("CooperativeMatrixLayout", "ColumnMajorKHR")
        self.ones = m.constant_composite(self.b_type, [m.constant(self.f16, 1.0)])
        self.zero = m.constant_composite(self.c_type, [m.constant(f32, 0.0)])
        self._invocation()

    def is_staged(self, blocks: LayerBlocks) -> bool:
        """Whether a layer's blocks stage their tape tiles: as the tuning says, else from `STAGED_FROM_ROW_TILES`."""
        return blocks.row_tiles >= STAGED_FROM_ROW_TILES if self.staged_always is None else self.staged_always

    def _staging(self) -> None:
        """The two workgroup arrays staged blocks copy a tile's inputs and deltas into (a part a subgroup)."""
        m, frame = self.m, self.frame
        self.word = word_type(frame)
        self.tape_words = word_view(frame, TAPE, writable=False)
        widest = max(max(b.column_tiles, b.row_tiles) for b in self.blocks)
        stage_row = max(MAX_COLUMN_TILES, widest) * TILE + STAGE_PAD  # halves a staged sample takes, at most
        self.stage_words = TILE * stage_row // HALVES_PER_WORD  # elements of one subgroup's part
        stage_type = m.type_array(self.word, m.constant(self.u32, self.stage_words * self.subgroups))
        self.stages = [m.global_variable("Workgroup", stage_type, name=name)
                       for name in ("staged_inputs", "staged_deltas")]

    def _invocation(self) -> None:
        """The invocation's task (block), lane, chunk and the chunk's first sample."""
        frame, ix, fn = self.frame, self.ix, self.fn
        group = SUBGROUP * self.subgroups
        self.task = ix.div(frame.sample, frame.uint(group))
        if self.subgroups == 1:
            self.lane, self.part = ix.mod(frame.sample, frame.uint(SUBGROUP)), frame.zero
        else:
            self.lane, self.part = (self.ops.load(self.u32, self.m.builtin_input(name, self.u32))
                                    for name in ("SubgroupLocalInvocationId", "SubgroupId"))
            self.local = ix.mod(frame.sample, frame.uint(group))  # the invocation's index in its work-group
        chunk = self.ops.extract(self.u32, frame.invocation_id, 1, name="chunk")
        self.capacity, self.batch = frame.push_value("capacity"), frame.push_value("batch")
        self.chunk_base = ix.mul(chunk, frame.push_value("parameters"))
        self.chunk_tiles = frame.push_value("chunk_tiles")
        self.first_sample = ix.mul(chunk, ix.mul(self.chunk_tiles, frame.uint(TILE)))
        self.written = fn.variable(self.f32, initializer=self.m.constant(self.f32, 0.0))  # the sum it writes

    def matrix(self, component, use: str):
        return self.m.type_cooperative_matrix_khr(component, "Subgroup", TILE, TILE, use)

    def finish(self) -> Binary:
        flag_nonfinite(self.frame, self.ops.load(self.f32, self.written), STATUS)
        self.frame.main.return_()
        self.m.entry_point(self.frame.main, "main", "GLCompute", local_size=self.frame.workgroup_size)
        return training_kernel("cooperative-matrix weight gradients", self.m.to_bytes(), self.frame.workgroup_size,
                               3, self.push, FEATURES)

    # ----- one layer's blocks -----------------------------------------------------------------------------------------

    def layer(self, blocks: LayerBlocks) -> None:
        """The code of every block of one layer, run by the subgroups whose task is one of them."""
        frame, fn, ix = self.frame, self.fn, self.ix
        with fn.if_(ix.within(self.task, blocks.first, blocks.first + blocks.count)):
            block = self._block(blocks, self.parameters.layers[blocks.index])
            self._delta_addressing(block)
            block.inputs = ix.add(ix.mul(frame.uint(self.tape.input_start(blocks.index)),
                                           self.capacity), block.k0)
            with fn.for_range(self.part, self.chunk_tiles, self._parts()) as t:
                b0 = ix.add(self.first_sample, ix.mul(t, frame.uint(TILE)))
                with fn.if_(ix.less(b0, self.batch)):
                    self._samples(block, b0)
            self._write_block(block)

    def _block(self, blocks: LayerBlocks, layer) -> Block:
        """The task's block of `layer`: its first row and column, its tiles inside the layer, zeroed accumulators."""
        frame, fn, ix = self.frame, self.fn, self.ix
        staged = self.is_staged(blocks)
        block = ix.sub(self.task, frame.uint(blocks.first))
        m0 = ix.mul(ix.mod(block, frame.uint(blocks.row_blocks)), frame.uint(blocks.row_tiles * TILE))
        k0 = ix.mul(ix.div(block, frame.uint(blocks.row_blocks)),
                frame.uint(blocks.column_tiles * TILE))
        rows_whole = -(-layer.rows // TILE) % blocks.row_tiles == 0
        cols_whole = -(-layer.cols // TILE) % blocks.column_tiles == 0
        row_inside = [self._inside(m0, r, layer.rows, rows_whole) for r in range(blocks.row_tiles)]
        col_inside = [self._inside(k0, c, layer.cols, cols_whole) for c in range(blocks.column_tiles)]
        with_bias = ix.equal(k0, frame.zero)
        products = [[fn.variable(self.c_type, initializer=self.zero) for _ in range(blocks.column_tiles)]
                    for _ in range(blocks.row_tiles)]
        sums = [fn.variable(self.c_type, initializer=self.zero) for _ in range(blocks.row_tiles)]
        return Block(blocks, layer, m0, k0, row_inside, col_inside, with_bias, products, sums, staged)

    def _inside(self, first, tile: int, limit: int, whole: bool):
        """Whether the block's tile `tile` (from `first`) starts inside `limit`; None where every block's does."""
        return None if whole else self.ix.less(self.ix.add(first, self.frame.uint(tile * TILE)),
                                               self.frame.uint(limit))

    def _delta_addressing(self, block: Block) -> None:
        """Where the block's delta tiles start: sample-major, element (b, m) at start capacity + b rows + m; else
        feature-major, at (start + m) capacity + b."""
        start, ix = self.frame.uint(self.tape.delta_start(block.blocks.index)), self.ix
        if self.tape.deltas == "samples":
            block.delta_layout, block.delta_stride = self.column_major, self.frame.uint(block.layer.rows)
            block.delta_base = ix.add(ix.mul(start, self.capacity), block.m0)
        else:
            block.delta_layout, block.delta_stride = self.row_major, self.capacity
            block.delta_base = ix.mul(ix.add(start, block.m0), self.capacity)

    def _delta_tile(self, block: Block, b0, r: int):
        """The tape half where the block's row tile `r` of deltas for samples b0.. starts."""
        ix, uint = self.ix, self.frame.uint
        if self.tape.deltas == "samples":
            return ix.add(block.delta_base, ix.add(ix.mul(b0, uint(block.layer.rows)),
                                                     uint(r * TILE)))
        return ix.add(ix.add(block.delta_base, ix.mul(uint(r * TILE), self.capacity)), b0)

    # ----- 16 samples of a block --------------------------------------------------------------------------------------

    def _samples(self, block: Block, b0) -> None:
        """Multiply-add samples b0..b0+15 into the block's accumulators (staged through workgroup memory first where
        the block is `staged`)."""
        fn, ix = self.fn, self.ix
        block_inputs = ix.add(block.inputs, ix.mul(b0, self.frame.uint(block.layer.cols)))
        staged_deltas = block.staged and self.tape.deltas == "samples"
        if block.staged:
            self._stage(self.stages[0], block_inputs, block.layer.cols, block.input_row)
            if staged_deltas:
                self._stage(self.stages[1], self._delta_tile(block, b0, 0), block.layer.rows, block.delta_row)
            self._stage_barrier()
        b_tiles = [self._input_tile(block, block_inputs, c) for c in range(len(block.col_inside))]
        for r, row_valid in enumerate(block.row_inside):
            with self._guarded(row_valid):
                a = self._delta_matrix(block, b0, r, staged_deltas)
                for b, col_valid, accumulator in zip(b_tiles, block.col_inside, block.products[r]):
                    with self._guarded(col_valid):
                        self._multiply_add(a, b, accumulator)
                with fn.if_(block.with_bias):
                    self._multiply_add(a, self.ones, block.sums[r])
        if block.staged:
            self._stage_barrier()

    def _parts(self):
        """The step between a subgroup's 16-sample tiles: the work-group's subgroups take them in turn (None: 1)."""
        return None if self.subgroups == 1 else self.frame.uint(self.subgroups)

    def _stage_barrier(self) -> None:
        """Between a subgroup's staging and its loads: its own part of the staging arrays, so of its scope where the
        work-group has several subgroups."""
        self.fn.barrier("Workgroup" if self.subgroups == 1 else "Subgroup")

    def _guarded(self, condition):
        """A selection on `condition` (uniform in the subgroup), or no guard where it is None."""
        return contextlib.nullcontext() if condition is None else self.fn.if_(condition)

    def _multiply_add(self, a, b, accumulator) -> None:
        previous = self.ops.load(self.c_type, accumulator)
        self.ops.store(accumulator, self.ops.matrix_mul_add(self.c_type, a, b,
                                                            previous))

    def _stage(self, target, start, width: int, row_words: int) -> None:
        """16 samples from tape half `start` on (samples `width` halves apart) into staging array `target`, rows
        `row_words` elements apart, the pad left out: an element an invocation, consecutive lanes on consecutive
        addresses. A sample's elements are 2 a tile, so the copy is whole rounds of the subgroup."""
        m, ix, uint, word = self.m, self.ix, self.frame.uint, self.word
        per_sample = row_words - STAGE_PAD // HALVES_PER_WORD
        first_word = ix.shift_right(start, uint(HALVES_PER_WORD.bit_length() - 1))
        for e0 in range(0, TILE * per_sample, SUBGROUP):
            e = ix.add(self.lane, uint(e0))
            sample, piece = ix.div(e, uint(per_sample)), ix.mod(e, uint(per_sample))
            source = ix.add(ix.add(first_word, ix.mul(sample, uint(width // HALVES_PER_WORD))),
                        piece)
            value = self.ops.load(word, self.ops.access_chain(m.type_pointer("StorageBuffer", word),
                                                              self.tape_words, self.frame.zero, source))
            self.ops.store(self.ops.access_chain(m.type_pointer("Workgroup", word), target, self._in_part(ix.add(
                ix.mul(sample, uint(row_words)), piece))), value, "NonPrivatePointer")

    def _staged_tile(self, target, tile_index: int):
        """A pointer to the corner of the 16-wide tile `tile_index` of staging array `target`."""
        return self.ops.access_chain(self.m.type_pointer("Workgroup", self.word), target,
                                     self._in_part(self.frame.uint(tile_index * TILE // HALVES_PER_WORD)))

    def _in_part(self, element):
        """A staging element counted in the subgroup's part (the element itself with one subgroup)."""
        if self.subgroups == 1:
            return element
        return self.ix.add(element, self.ix.mul(self.part, self.frame.uint(self.stage_words)))

    def _input_tile(self, block: Block, block_inputs, c: int):
        """The B tile of the block's column tile `c` over the 16 samples whose inputs start at `block_inputs`."""
        uint = self.frame.uint
        if block.staged:
            return self.ops.matrix_load(self.b_type, self._staged_tile(self.stages[0], c),
                                        self.row_major, uint(block.input_row), "NonPrivatePointer")
        pointer = self.frame.element_pointer(TAPE, self.ix.add(block_inputs, uint(c * TILE)), self.f16)
        return self.ops.matrix_load(self.b_type, pointer, self.row_major, uint(block.layer.cols))

    def _delta_matrix(self, block: Block, b0, r: int, staged_deltas: bool):
        """The A tile of the block's row tile `r` over samples b0..b0+15: their deltas, transposed."""
        if staged_deltas:
            return self.ops.matrix_load(self.a_type, self._staged_tile(self.stages[1], r),
                                        self.column_major, self.frame.uint(block.delta_row), "NonPrivatePointer")
        pointer = self.frame.element_pointer(TAPE, self._delta_tile(block, b0, r), self.f16)
        return self.ops.matrix_load(self.a_type, pointer, block.delta_layout, block.delta_stride)

    # ----- the block's partial gradient -------------------------------------------------------------------------------

    def _write_block(self, block: Block) -> None:
        """The block's accumulators into the chunk's partial gradients: weights, and biases where it has them."""
        fn, ix, uint, layer = self.fn, self.ix, self.frame.uint, block.layer
        for r, row_valid in enumerate(block.row_inside):
            row0 = ix.add(block.m0, uint(r * TILE))
            with self._guarded(row_valid):
                for c, (col_valid, accumulator) in enumerate(zip(block.col_inside, block.products[r])):
                    with self._guarded(col_valid):
                        self._write_out(self.ops.load(self.c_type, accumulator), row0,
                                        ix.add(block.k0, uint(c * TILE)), layer.rows, layer.cols,
                                        lambda i, j: ix.add(uint(layer.weight_offset),
                                                        ix.add(ix.mul(i, uint(layer.cols)), j)))
                with fn.if_(block.with_bias):
                    self._write_out(self.ops.load(self.c_type, block.sums[r]), row0, self.frame.zero,
                                    layer.rows, 1, lambda i, j: ix.add(uint(layer.bias_offset), i))

    def _write_out(self, accumulator, row0, col0, rows: int, cols: int, target) -> None:
        """Tile -> workgroup memory -> partials[target(row, col)] for the tile's elements with row < rows and
        col < cols (row0, col0: the tile's first row and column)."""
        fn, m, ix, frame, f32 = self.fn, self.m, self.ix, self.frame, self.f32
        if self.subgroups > 1:
            self._write_sum(accumulator, row0, col0, rows, cols, target)
            return
        pointer = self.ops.access_chain(m.type_pointer("Workgroup", f32), self.tile_memory, frame.zero)
        self.ops.matrix_store(pointer, accumulator, self.row_major, frame.uint(TILE))
        fn.barrier()
        for step in range(TILE * TILE // SUBGROUP):
            element = ix.add(self.lane, frame.uint(step * SUBGROUP))
            row = ix.add(row0, ix.div(element, frame.uint(TILE)))
            col = ix.add(col0, ix.mod(element, frame.uint(TILE)))
            inside = ix.both(ix.less(row, frame.uint(rows)), ix.less(col, frame.uint(cols)))
            with fn.if_(inside):
                value = self.ops.load(f32, self.ops.access_chain(m.type_pointer("Workgroup", f32),
                                                                 self.tile_memory, element))
                self._write_partial(target(row, col), value)
        fn.barrier()

    def _write_partial(self, index, value) -> None:
        """partials[chunk base + index] = value, added to the sum the invocation checks at the end."""
        frame, ops, f32 = self.frame, self.ops, self.f32
        ops.store(frame.element_pointer(PARTIALS, self.ix.add(self.chunk_base, index), f32), value)
        ops.store(self.written, ops.float_add(f32, ops.load(f32, self.written), value))

    def _write_sum(self, accumulator, row0, col0, rows: int, cols: int, target) -> None:
        """`_write_out` of a work-group of several subgroups: each stores its tile in its part of workgroup memory,
        and every invocation of the group writes the sum over the parts of a whole number of the tile's elements."""
        fn, m, ix, frame, f32, ops = self.fn, self.m, self.ix, self.frame, self.f32, self.ops
        tile_pointer = m.type_pointer("Workgroup", f32)
        own = ops.access_chain(tile_pointer, self.tile_memory, ix.mul(self.part, frame.uint(TILE * TILE)))
        ops.matrix_store(own, accumulator, self.row_major, frame.uint(TILE), "NonPrivatePointer")
        fn.barrier()
        group = SUBGROUP * self.subgroups
        for step in range(TILE * TILE // group):
            element = ix.add(self.local, frame.uint(step * group))
            row = ix.add(row0, ix.div(element, frame.uint(TILE)))
            col = ix.add(col0, ix.mod(element, frame.uint(TILE)))
            with fn.if_(ix.both(ix.less(row, frame.uint(rows)), ix.less(col, frame.uint(cols)))):
                value = m.constant(f32, 0.0)
                for part in range(self.subgroups):
                    value = ops.float_add(f32, value, ops.load(f32, ops.access_chain(
                        tile_pointer, self.tile_memory, ix.add(element, frame.uint(part * TILE * TILE))),
                        "NonPrivatePointer"))
                self._write_partial(target(row, col), value)
        fn.barrier()

