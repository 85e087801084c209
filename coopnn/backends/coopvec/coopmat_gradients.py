"""Weight gradients as matrix products of the tape on cooperative matrices (VK_KHR_cooperative_matrix).

Layer l's weight gradient is Delta_l^T (rows x samples) times Input_l (samples x cols), a matrix product whose long
dimension is the batch. One subgroup of 32 invocations takes one tile row of one layer (16 rows m0..m0+15) over one
chunk of `chunk_tiles` x 16 samples: per 16 samples it loads the 16 x 16 delta tile (the tape keeps deltas
feature-major, so rows of Delta^T are contiguous) and, for every 16-column tile of the input block, one 16 x 16
input tile, and multiplies-and-adds them in float32 accumulators (16x16x16, float16 operands, the combination the
H100 lists). The product with a constant matrix of ones gives the bias gradients in every column. Tiles go through
workgroup memory to the chunk's partial gradients, keeping only rows and columns inside the layer (padded shapes are
whole 8s, not 16s); `partial_sum_shader` adds the chunks.

Bindings: 0 tape (f16), 1 partials (f32, written). Push: `count` (32 x tasks), `batch` (samples on the tape, padding
zero), `capacity`, `parameters` (elements of one chunk's partial gradients). Dispatch (tasks, chunks, 1) workgroups.
The tape needs `TILE` rows of capacity after its last region: a tile of a layer whose rows are not a multiple of 16
reads (and discards) rows past its region.
"""

from __future__ import annotations

from coopnn.shaders.targets.base import Binary, ShaderFrame, push_constant_block
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.shaders.training.shader import storage_buffer, training_kernel

TILE = 16
# 128 tiles a chunk and 4 column tiles a task: the fastest of 16-128 and 2-8 on the H100 but for a few percent
# (bench/results/nvidia-h100-80gb-hbm3-2026-11-25-coopmat-gradient-sweep.md)
CHUNK_TILES = 128
CHUNK = TILE * CHUNK_TILES
SUBGROUP = 32
MAX_COLUMN_TILES = 4
TAPE, PARTIALS = range(2)
FEATURES = frozenset({"cooperativeMatrix", "shaderFloat16", "storageBuffer16BitAccess", "vulkanMemoryModel"})


def tasks(parameters: ParameterLayout, column_tiles: int = MAX_COLUMN_TILES) -> list[tuple[int, int, int]]:
    """(layer, first row, first column tile) of every task, in dispatch order: a tile row of a layer, split into
    groups of at most `column_tiles` column tiles (more accumulators spill on the H100); the first group of each
    tile row also makes the bias gradients."""
    return [(index, m0, kt) for index, layer in enumerate(parameters.layers) for m0 in range(0, layer.rows, TILE)
            for kt in range(0, -(-layer.cols // TILE), column_tiles)]


def coopmat_gradient_shader(parameters: ParameterLayout, tape: TapeLayout, chunk_tiles: int = CHUNK_TILES,
                            column_tiles: int = MAX_COLUMN_TILES) -> Binary:
    push = push_constant_block(("count", "u32"), ("batch", "u32"), ("capacity", "u32"), ("parameters", "u32"))
    frame = ShaderFrame((), 32, SUBGROUP, push_constants=push)
    m, fn, u32, f32 = frame.module, frame.main, frame.u32, frame.f32
    f16 = m.type_float(16)
    storage_buffer(frame, TAPE, f16, writable=False, name="tape")
    storage_buffer(frame, PARTIALS, f32, writable=True, name="partials")
    tile_memory = m.global_variable("Workgroup", m.type_array(f32, m.constant(u32, TILE * TILE)), name="tile")

    def matrix(component, use):
        return m.type_cooperative_matrix_khr(component, "Subgroup", TILE, TILE, use)

    a_type, b_type, c_type = (matrix(f16, "MatrixAKHR"), matrix(f16, "MatrixBKHR"),
                              matrix(f32, "MatrixAccumulatorKHR"))
    row_major = m.enum_constant("CooperativeMatrixLayout", "RowMajorKHR")
    ones = m.constant_composite(b_type, [m.constant(f16, 1.0)])
    zero = m.constant_composite(c_type, [m.constant(f32, 0.0)])

    def op(name, *operands):
        return fn.emit(name, u32, *operands)

    def barrier():
        fn.emit("OpControlBarrier", m.enum_constant("Scope", "Workgroup"), m.enum_constant("Scope", "Workgroup"),
                m.enum_constant("MemorySemantics", "AcquireRelease", "WorkgroupMemory"))

    task = op("OpUDiv", frame.sample, frame.uint(SUBGROUP))
    lane = op("OpUMod", frame.sample, frame.uint(SUBGROUP))
    chunk = fn.emit("OpCompositeExtract", u32, frame.invocation_id, 1, name="chunk")
    capacity, batch = frame.push_value("capacity"), frame.push_value("batch")
    chunk_base = op("OpIMul", chunk, frame.push_value("parameters"))
    first_sample = op("OpIMul", chunk, frame.uint(chunk_tiles * TILE))

    def b_tile(block, kt: int, cols: int):
        pointer = frame.element_pointer(TAPE, op("OpIAdd", block, frame.uint(kt * TILE)), f16)
        return fn.emit("OpCooperativeMatrixLoadKHR", b_type, pointer, row_major, frame.uint(cols))

    def write_out(accumulator, valid_rows: int, valid_cols: int, target):
        """Tile -> workgroup memory -> partials[target(i, j)] for i < valid_rows, j < valid_cols."""
        pointer = fn.emit("OpAccessChain", m.type_pointer("Workgroup", f32), tile_memory, frame.zero)
        fn.emit("OpCooperativeMatrixStoreKHR", pointer, accumulator, row_major, frame.uint(TILE))
        barrier()
        for step in range(TILE * TILE // SUBGROUP):
            element = op("OpIAdd", lane, frame.uint(step * SUBGROUP))
            i, j = op("OpUDiv", element, frame.uint(TILE)), op("OpUMod", element, frame.uint(TILE))
            inside = fn.emit("OpLogicalAnd", frame.bool, fn.emit("OpULessThan", frame.bool, i, frame.uint(valid_rows)),
                             fn.emit("OpULessThan", frame.bool, j, frame.uint(valid_cols)))
            with fn.if_(inside):
                value = fn.emit("OpLoad", f32, fn.emit("OpAccessChain", m.type_pointer("Workgroup", f32),
                                                         tile_memory, element))
                fn.emit("OpStore", frame.element_pointer(PARTIALS, op("OpIAdd", chunk_base, target(i, j)), f32), value)
        barrier()

    for number, (index, m0, first_tile) in enumerate(tasks(parameters, column_tiles)):
        layer = parameters.layers[index]
        with fn.if_(fn.emit("OpIEqual", frame.bool, task, frame.uint(number))):
            col_tiles = range(first_tile, min(first_tile + column_tiles, -(-layer.cols // TILE)))
            with_bias = first_tile == 0
            accumulators = [fn.variable(c_type, initializer=zero) for _ in range(len(col_tiles) + with_bias)]
            delta_rows = op("OpIMul", frame.uint(tape.delta_start(index) + m0), capacity)
            inputs = op("OpIMul", frame.uint(tape.input_start(index)), capacity)
            with fn.for_range(frame.zero, frame.uint(chunk_tiles)) as t:
                b0 = op("OpIAdd", first_sample, op("OpIMul", t, frame.uint(TILE)))
                with fn.if_(fn.emit("OpULessThan", frame.bool, b0, batch)):
                    a = fn.emit("OpCooperativeMatrixLoadKHR", a_type,
                                frame.element_pointer(TAPE, op("OpIAdd", delta_rows, b0), f16), row_major, capacity)
                    block = op("OpIAdd", inputs, op("OpIMul", b0, frame.uint(layer.cols)))
                    products = [(b_tile(block, kt, layer.cols), accumulator)
                                for kt, accumulator in zip(col_tiles, accumulators)]
                    if with_bias:
                        products.append((ones, accumulators[-1]))
                    for b, accumulator in products:
                        previous = fn.emit("OpLoad", c_type, accumulator)
                        fn.emit("OpStore", accumulator, fn.emit("OpCooperativeMatrixMulAddKHR", c_type, a, b, previous))
            valid_rows = min(TILE, layer.rows - m0)
            for kt, accumulator in zip(col_tiles, accumulators):
                k0 = kt * TILE
                write_out(fn.emit("OpLoad", c_type, accumulator), valid_rows, min(TILE, layer.cols - k0),
                          lambda i, j, k0=k0: op("OpIAdd", frame.uint(layer.weight_offset + m0 * layer.cols + k0),
                                                 op("OpIAdd", op("OpIMul", i, frame.uint(layer.cols)), j)))
            if with_bias:
                write_out(fn.emit("OpLoad", c_type, accumulators[-1]), valid_rows, 1,
                          lambda i, j: op("OpIAdd", frame.uint(layer.bias_offset + m0), i))
    frame.main.return_()
    frame.module.entry_point(frame.main, "main", "GLCompute", local_size=frame.workgroup_size)
    return training_kernel("cooperative-matrix weight gradients", frame.module.to_bytes(), frame.workgroup_size, 2,
                           push, FEATURES)
