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
number: a copy per block made the shader grow with the model, and 128-wide layers (80 blocks of one row tile) took
4.3 ms of gradients per step on the H100 against 1.7 ms with cooperative vectors.

Blocks of `STAGED_FROM_ROW_TILES` row tiles or more stage each 16 samples' tiles through workgroup memory: the subgroup
copies the block's inputs (16 samples x its columns, contiguous for each sample) and, where the tape keeps deltas
sample-major, its deltas into two arrays of 16-byte elements, consecutive lanes on consecutive addresses, and loads the
A and B tiles from there; a 16 x 16 tile loaded from device memory has each lane read parts of rows a layer apart.
The tape then needs its regions to start on 8-half boundaries (widths and capacity multiples of 8, as sessions make
them).

A subgroup's 16-sample steps wait on their loads from device memory, so the kernel needs many subgroups at once:
`chunking` halves the chunk (from `MAX_CHUNK_TILES` tiles down to `MIN_CHUNK_TILES`) until a batch's chunks
give at least `TARGET_SUBGROUPS` subgroups; `most_chunks` bounds the partial gradients a capacity needs.

Every partial gradient it writes that is not finite sets the training state's status word (binding 2), so the
optimizer, which adds the partials itself, knows before it starts whether the step is skipped. Each invocation adds
the partials it writes and checks that one sum at the end: the tape is float16, so its finite products summed in
float32 stay below 65504^2 times 2^32 samples, and a sum is finite exactly when its terms are. Checking each partial
as it was written cost 5-7 us of a step at 2^18 on the H100.

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
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.shaders.training.shader import HALVES_PER_WORD, storage_buffer, training_kernel, word_type, word_view

TILE = 16
# 128 tiles a chunk: the fastest of 16-128 on the H100 but for a few percent
# (bench/results/nvidia-h100-80gb-hbm3-2026-11-25-coopmat-gradient-sweep.md), while the partial gradients were added
# by one invocation per element. Blocks of 2 x 4 tiles, or 4 x 4 in layers of 128 rows or more: of 1x4, 2x4, 2x2,
# 4x2 and 4x4 timed with the GPU's clocks kept up (`...-2026-11-27-coopmat-gradient-blocks.md`, second sweep), 2 x 4
# was the fastest on mlp_3_64x2_3 and mlp_32_64x4_16 (64-row layers) at 2^16 and 2^18, and 4 x 4 on mlp_64_128x4_16
# (128-row layers): 0.428 against 0.695 ms at 2^18, 0.134 against 0.173 ms at 2^16.
MAX_CHUNK_TILES = 128
MIN_CHUNK_TILES = 16
# Halving the chunk while a batch's chunks give fewer subgroups than this, on the H100 with the same session switching
# between steps (`...-2026-11-27-coopmat-gradient-chunks.md`): from 160 and 288 subgroups (mlp_3_64x2_3 and
# mlp_32_64x4_16 at 2^16) and 640 (mlp_3_64x2_3 at 2^18) it made the step 1.75, 1.35 and 1.17 times faster; from 960
# (mlp_64_128x4_16 at 2^16, blocks of 8 tiles) 8% slower.
TARGET_SUBGROUPS = 768
SUBGROUP = 32
MAX_COLUMN_TILES = 4
ROW_TILES = 2
WIDE_ROW_TILES = 4
WIDE_LAYER_ROWS = 128
TAPE, PARTIALS, STATUS = range(3)
# Blocks of at least this many row tiles stage their tape tiles through workgroup memory. On the H100 at 2^18 (2^16),
# staged 4 x 4 blocks took mlp_64_128x4_16's whole step from 1.156 to 1.056 ms (0.348 to 0.328); staged 2 x 4 blocks
# made the 64-wide models' steps 13-14% slower, and staged 4 x 4 blocks in 64-row layers 1% faster to 18% slower
# (`bench/results/nvidia-h100-80gb-hbm3-2026-11-27-tiled-step-ablation.md`).
STAGED_FROM_ROW_TILES = 4
STAGE_PAD = 8  # halves past a staged row: the rows of a tile start on different banks
FEATURES = frozenset({"cooperativeMatrix", "shaderFloat16", "storageBuffer16BitAccess", "vulkanMemoryModel"}
                     | STATUS_FEATURES)


@dataclass(frozen=True)
class LayerBlocks:
    """How a layer's gradient is cut into subgroup blocks: `row_tiles` x `column_tiles` tiles each,
    `row_blocks` x `column_blocks` of them, numbered row block fastest from task `first`."""

    index: int
    first: int
    row_tiles: int
    column_tiles: int
    row_blocks: int
    column_blocks: int

    @property
    def count(self) -> int:
        return self.row_blocks * self.column_blocks


def row_tiles_of(layer_rows: int) -> int:
    """Row tiles of a block of a layer of `layer_rows` rows (before `layer_blocks` caps them at the layer's)."""
    return WIDE_ROW_TILES if layer_rows >= WIDE_LAYER_ROWS else ROW_TILES


def layer_blocks(parameters: ParameterLayout, row_tiles: int | None = None,
                 column_tiles: int = MAX_COLUMN_TILES) -> list[LayerBlocks]:
    """Every layer's blocks, in dispatch order, each at most `row_tiles` (by default `row_tiles_of` the layer) x
    `column_tiles` tiles (fewer where the layer has fewer)."""
    out, first = [], 0
    for index, layer in enumerate(parameters.layers):
        rows, cols = -(-layer.rows // TILE), -(-layer.cols // TILE)
        r = min(row_tiles_of(layer.rows) if row_tiles is None else row_tiles, rows)
        c = min(column_tiles, cols)
        out.append(LayerBlocks(index, first, r, c, -(-rows // r), -(-cols // c)))
        first += out[-1].count
    return out


def task_count(parameters: ParameterLayout) -> int:
    """Subgroups (work-groups) of one chunk."""
    return sum(blocks.count for blocks in layer_blocks(parameters))


def chunking(parameters: ParameterLayout, count: int) -> tuple[int, int]:
    """(tiles of 16 samples a chunk, chunks) of a batch of `count` samples: the most tiles (up to `MAX_CHUNK_TILES`)
    whose chunks give `TARGET_SUBGROUPS` subgroups, or `MIN_CHUNK_TILES`."""
    tasks, tiles = task_count(parameters), MAX_CHUNK_TILES
    while tiles > MIN_CHUNK_TILES and -(-count // (tiles * TILE)) * tasks < TARGET_SUBGROUPS:
        tiles //= 2
    return tiles, -(-count // (tiles * TILE))


def most_chunks(parameters: ParameterLayout, capacity: int) -> int:
    """At least the chunks (`chunking`) of any batch up to `capacity` samples: a chunk has `MAX_CHUNK_TILES` tiles,
    or is halved only while the chunks give fewer than `TARGET_SUBGROUPS` subgroups, so less than twice that many
    once halved."""
    halved = 2 * -(-TARGET_SUBGROUPS // task_count(parameters)) + 1
    return min(-(-capacity // (MIN_CHUNK_TILES * TILE)), max(-(-capacity // (MAX_CHUNK_TILES * TILE)), halved))


def coopmat_gradient_shader(parameters: ParameterLayout, tape: TapeLayout, row_tiles: int | None = None,
                            column_tiles: int = MAX_COLUMN_TILES) -> Binary:
    push = push_constant_block(("count", "u32"), ("batch", "u32"), ("capacity", "u32"), ("parameters", "u32"),
                               ("chunk_tiles", "u32"))
    frame = ShaderFrame((), 32, SUBGROUP, push_constants=push)
    m, fn, u32, f32 = frame.module, frame.main, frame.u32, frame.f32
    f16 = m.type_float(16)
    storage_buffer(frame, TAPE, f16, writable=False, name="tape")
    storage_buffer(frame, PARTIALS, f32, writable=True, name="partials")
    storage_buffer(frame, STATUS, u32, writable=True, name="state")
    tile_memory = m.global_variable("Workgroup", m.type_array(f32, m.constant(u32, TILE * TILE)), name="tile")
    if any(b.row_tiles >= STAGED_FROM_ROW_TILES for b in layer_blocks(parameters, row_tiles, column_tiles)):
        word = word_type(frame)
        tape_words = word_view(frame, TAPE, writable=False)
        stage_row = MAX_COLUMN_TILES * TILE + STAGE_PAD  # halves a staged sample takes, at most
        stage_type = m.type_array(word, m.constant(u32, TILE * stage_row // HALVES_PER_WORD))
        stages = [m.global_variable("Workgroup", stage_type, name=name) for name in ("staged_inputs", "staged_deltas")]

    def matrix(component, use):
        return m.type_cooperative_matrix_khr(component, "Subgroup", TILE, TILE, use)

    a_type, b_type, c_type = (matrix(f16, "MatrixAKHR"), matrix(f16, "MatrixBKHR"),
                              matrix(f32, "MatrixAccumulatorKHR"))
    row_major = m.enum_constant("CooperativeMatrixLayout", "RowMajorKHR")
    column_major = m.enum_constant("CooperativeMatrixLayout", "ColumnMajorKHR")
    ones = m.constant_composite(b_type, [m.constant(f16, 1.0)])
    zero = m.constant_composite(c_type, [m.constant(f32, 0.0)])

    def op(name, *operands):
        return fn.emit(name, u32, *operands)

    task = op("OpUDiv", frame.sample, frame.uint(SUBGROUP))
    lane = op("OpUMod", frame.sample, frame.uint(SUBGROUP))
    chunk = fn.emit("OpCompositeExtract", u32, frame.invocation_id, 1, name="chunk")
    capacity, batch = frame.push_value("capacity"), frame.push_value("batch")
    chunk_base = op("OpIMul", chunk, frame.push_value("parameters"))
    chunk_tiles = frame.push_value("chunk_tiles")
    first_sample = op("OpIMul", chunk, op("OpIMul", chunk_tiles, frame.uint(TILE)))
    written = fn.variable(f32, initializer=m.constant(f32, 0.0))  # the sum of what the invocation writes

    def write_out(accumulator, row0, col0, rows: int, cols: int, target):
        """Tile -> workgroup memory -> partials[target(row, col)] for the tile's elements with row < rows and
        col < cols (row0, col0: the tile's first row and column)."""
        pointer = fn.emit("OpAccessChain", m.type_pointer("Workgroup", f32), tile_memory, frame.zero)
        fn.emit("OpCooperativeMatrixStoreKHR", pointer, accumulator, row_major, frame.uint(TILE))
        fn.barrier()
        for step in range(TILE * TILE // SUBGROUP):
            element = op("OpIAdd", lane, frame.uint(step * SUBGROUP))
            row = op("OpIAdd", row0, op("OpUDiv", element, frame.uint(TILE)))
            col = op("OpIAdd", col0, op("OpUMod", element, frame.uint(TILE)))
            inside = fn.emit("OpLogicalAnd", frame.bool, fn.emit("OpULessThan", frame.bool, row, frame.uint(rows)),
                             fn.emit("OpULessThan", frame.bool, col, frame.uint(cols)))
            with fn.if_(inside):
                value = fn.emit("OpLoad", f32, fn.emit("OpAccessChain", m.type_pointer("Workgroup", f32),
                                                         tile_memory, element))
                fn.emit("OpStore", frame.element_pointer(PARTIALS, op("OpIAdd", chunk_base, target(row, col)), f32),
                        value)
                fn.emit("OpStore", written, fn.emit("OpFAdd", f32, fn.emit("OpLoad", f32, written), value))
        fn.barrier()

    def inside(first, tile: int, limit: int, whole: bool):
        """Whether the block's tile `tile` (from `first`) starts inside `limit`; None where every block's does."""
        return None if whole else fn.emit("OpULessThan", frame.bool, op("OpIAdd", first, frame.uint(tile * TILE)),
                                          frame.uint(limit))

    def guarded(condition):
        """A selection on `condition` (uniform in the subgroup), or no guard where it is None."""
        return contextlib.nullcontext() if condition is None else fn.if_(condition)

    for blocks in layer_blocks(parameters, row_tiles, column_tiles):
        layer = parameters.layers[blocks.index]
        in_layer = fn.emit("OpLogicalAnd", frame.bool,
                           fn.emit("OpUGreaterThanEqual", frame.bool, task, frame.uint(blocks.first)),
                           fn.emit("OpULessThan", frame.bool, task, frame.uint(blocks.first + blocks.count)))
        with fn.if_(in_layer):
            block = op("OpISub", task, frame.uint(blocks.first))
            m0 = op("OpIMul", op("OpUMod", block, frame.uint(blocks.row_blocks)),
                    frame.uint(blocks.row_tiles * TILE))
            k0 = op("OpIMul", op("OpUDiv", block, frame.uint(blocks.row_blocks)),
                    frame.uint(blocks.column_tiles * TILE))
            rows_whole = -(-layer.rows // TILE) % blocks.row_tiles == 0
            cols_whole = -(-layer.cols // TILE) % blocks.column_tiles == 0
            row_inside = [inside(m0, r, layer.rows, rows_whole) for r in range(blocks.row_tiles)]
            col_inside = [inside(k0, c, layer.cols, cols_whole) for c in range(blocks.column_tiles)]
            with_bias = fn.emit("OpIEqual", frame.bool, k0, frame.zero)
            products = [[fn.variable(c_type, initializer=zero) for _ in range(blocks.column_tiles)]
                        for _ in range(blocks.row_tiles)]
            sums = [fn.variable(c_type, initializer=zero) for _ in range(blocks.row_tiles)]
            start = frame.uint(tape.delta_start(blocks.index))
            if tape.deltas == "samples":  # element (b, m) at start capacity + b rows + m
                delta_layout, delta_stride = column_major, frame.uint(layer.rows)

                def delta_tile(b0, r, deltas=op("OpIAdd", op("OpIMul", start, capacity), m0), rows=layer.rows):
                    return op("OpIAdd", deltas, op("OpIAdd", op("OpIMul", b0, frame.uint(rows)), frame.uint(r * TILE)))
            else:  # element (b, m) at (start + m) capacity + b
                delta_layout, delta_stride = row_major, capacity

                def delta_tile(b0, r, delta_rows=op("OpIMul", op("OpIAdd", start, m0), capacity)):
                    return op("OpIAdd", op("OpIAdd", delta_rows, op("OpIMul", frame.uint(r * TILE), capacity)), b0)
            inputs = op("OpIAdd", op("OpIMul", frame.uint(tape.input_start(blocks.index)), capacity), k0)

            def multiply_add(a, b, accumulator):
                previous = fn.emit("OpLoad", c_type, accumulator)
                fn.emit("OpStore", accumulator, fn.emit("OpCooperativeMatrixMulAddKHR", c_type, a, b, previous))

            staged = blocks.row_tiles >= STAGED_FROM_ROW_TILES
            staged_deltas = staged and tape.deltas == "samples"
            in_row = (blocks.column_tiles * TILE + STAGE_PAD) // HALVES_PER_WORD
            delta_row = (blocks.row_tiles * TILE + STAGE_PAD) // HALVES_PER_WORD

            def stage(target, start, width, row_words):
                """16 samples from tape half `start` on (samples `width` halves apart) into staging array `target`,
                rows `row_words` elements apart, the pad left out: an element an invocation, consecutive lanes on
                consecutive addresses. A sample's elements are 2 a tile, so the copy is whole rounds of the subgroup."""
                per_sample = row_words - STAGE_PAD // HALVES_PER_WORD
                first_word = op("OpShiftRightLogical", start, frame.uint(HALVES_PER_WORD.bit_length() - 1))
                for e0 in range(0, TILE * per_sample, SUBGROUP):
                    e = op("OpIAdd", lane, frame.uint(e0))
                    sample, piece = op("OpUDiv", e, frame.uint(per_sample)), op("OpUMod", e, frame.uint(per_sample))
                    source = op("OpIAdd", op("OpIAdd", first_word, op("OpIMul", sample, frame.uint(
                        width // HALVES_PER_WORD))), piece)
                    value = fn.emit("OpLoad", word, fn.emit("OpAccessChain", m.type_pointer("StorageBuffer", word),
                                                            tape_words, frame.zero, source))
                    fn.emit("OpStore", fn.emit("OpAccessChain", m.type_pointer("Workgroup", word), target, op(
                        "OpIAdd", op("OpIMul", sample, frame.uint(row_words)), piece)), value, "NonPrivatePointer")

            def staged_tile(target, tile_index):
                """A pointer to the corner of the 16-wide tile `tile_index` of staging array `target`."""
                return fn.emit("OpAccessChain", m.type_pointer("Workgroup", word), target,
                               frame.uint(tile_index * TILE // HALVES_PER_WORD))

            def input_tile(block_inputs, c):
                """The B tile of the block's column tile `c` over the 16 samples whose inputs start at
                `block_inputs`."""
                if staged:
                    return fn.emit("OpCooperativeMatrixLoadKHR", b_type, staged_tile(stages[0], c), row_major,
                                   frame.uint(in_row), "NonPrivatePointer")
                pointer = frame.element_pointer(TAPE, op("OpIAdd", block_inputs, frame.uint(c * TILE)), f16)
                return fn.emit("OpCooperativeMatrixLoadKHR", b_type, pointer, row_major, frame.uint(layer.cols))

            def delta_matrix(b0, r):
                """The A tile of the block's row tile `r` over samples b0..b0+15: their deltas, transposed."""
                if staged_deltas:
                    return fn.emit("OpCooperativeMatrixLoadKHR", a_type, staged_tile(stages[1], r), column_major,
                                   frame.uint(delta_row), "NonPrivatePointer")
                pointer = frame.element_pointer(TAPE, delta_tile(b0, r), f16)
                return fn.emit("OpCooperativeMatrixLoadKHR", a_type, pointer, delta_layout, delta_stride)

            with fn.for_range(frame.zero, chunk_tiles) as t:
                b0 = op("OpIAdd", first_sample, op("OpIMul", t, frame.uint(TILE)))
                with fn.if_(fn.emit("OpULessThan", frame.bool, b0, batch)):
                    block_inputs = op("OpIAdd", inputs, op("OpIMul", b0, frame.uint(layer.cols)))
                    if staged:
                        stage(stages[0], block_inputs, layer.cols, in_row)
                        if staged_deltas:
                            stage(stages[1], delta_tile(b0, 0), layer.rows, delta_row)
                        fn.barrier()
                    b_tiles = [input_tile(block_inputs, c) for c in range(len(col_inside))]
                    for r, row_valid in enumerate(row_inside):
                        with guarded(row_valid):
                            a = delta_matrix(b0, r)
                            for b, col_valid, accumulator in zip(b_tiles, col_inside, products[r]):
                                with guarded(col_valid):
                                    multiply_add(a, b, accumulator)
                            with fn.if_(with_bias):
                                multiply_add(a, ones, sums[r])
                    if staged:
                        fn.barrier()
            for r, row_valid in enumerate(row_inside):
                row0 = op("OpIAdd", m0, frame.uint(r * TILE))
                with guarded(row_valid):
                    for c, (col_valid, accumulator) in enumerate(zip(col_inside, products[r])):
                        with guarded(col_valid):
                            write_out(fn.emit("OpLoad", c_type, accumulator), row0,
                                      op("OpIAdd", k0, frame.uint(c * TILE)), layer.rows, layer.cols,
                                      lambda i, j: op("OpIAdd", frame.uint(layer.weight_offset),
                                                      op("OpIAdd", op("OpIMul", i, frame.uint(layer.cols)), j)))
                    with fn.if_(with_bias):
                        write_out(fn.emit("OpLoad", c_type, sums[r]), row0, frame.zero, layer.rows, 1,
                                  lambda i, j: op("OpIAdd", frame.uint(layer.bias_offset), i))
    flag_nonfinite(frame, fn.emit("OpLoad", f32, written), STATUS)
    frame.main.return_()
    frame.module.entry_point(frame.main, "main", "GLCompute", local_size=frame.workgroup_size)
    return training_kernel("cooperative-matrix weight gradients", frame.module.to_bytes(), frame.workgroup_size, 3,
                           push, FEATURES)
