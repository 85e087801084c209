"""Weight gradients on the cooperative-vector target: sums over samples of the tape, as matrix-vector products.

Layer l's weight gradient is the sum over samples b of delta_l[:, b] times input_l[b, :]. Its row m over a run of
`SUB` samples is the product of the tape's input block (SUB samples x K, sample-major, which read column-major is a
K x SUB matrix) with the SUB deltas of row m (one contiguous vector: the tape keeps deltas feature-major), one
OpCooperativeVectorMatrixMulNV. The invocations of a subgroup take consecutive rows of one layer over the same
samples, so they multiply the same matrix and the driver runs them together on tensor cores: the reduction over
samples becomes a matrix product rather than one atomic outer product per sample, the approach the probe measured
at 2.7x slower than PyTorch. A bias row is the same product with a matrix of ones.

One invocation per (row, chunk of `CHUNK` samples): it adds its products in float32 and writes them to its chunk's
partial gradients; `partial_sum_shader` then adds the chunks. Bindings: 0 tape (f16), 1 partials (f32, written),
2 ones (f16, ONES_ROWS x SUB). Push: `count` (rows of the row space, see `row_starts`), `batch` (samples on the tape,
a multiple of SUB, padding zero), `capacity`, `parameters` (elements of one chunk's partial gradients). Dispatch
(ceil(count / 64), chunks, 1).
"""

from __future__ import annotations

import numpy as np

from coopnn.layouts.pack import align_up
from coopnn.shaders.targets.base import Binary, push_constant_block
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.shaders.training.shader import finish, storage_buffer, training_frame

SUB = 128  # samples per matrix-vector product
SUBS_PER_CHUNK = 4
CHUNK = SUB * SUBS_PER_CHUNK
ROW_GROUP = 32  # a layer's rows start at multiples of this, so no subgroup of 32 spans two layers
ONES_ROWS = 8  # the smallest padded output of a product; row 0 of the result is the bias sum
TAPE, PARTIALS, ONES = range(3)
FEATURES = frozenset({"cooperativeVector", "shaderFloat16", "storageBuffer16BitAccess"})


def row_starts(parameters: ParameterLayout) -> list[int]:
    """Where each layer's rows start in the invocation row space, and (last) the row space's size."""
    starts = [0]
    for layer in parameters.layers:
        starts.append(starts[-1] + align_up(layer.rows, ROW_GROUP))
    return starts


def ones_matrix(sub: int = SUB) -> np.ndarray:
    return np.ones((ONES_ROWS, sub), np.float16)


def coopvec_gradient_shader(parameters: ParameterLayout, tape: TapeLayout, sub: int = SUB,
                            subs_per_chunk: int = SUBS_PER_CHUNK) -> Binary:
    """The kernel for products of `sub` samples, `subs_per_chunk` of them per chunk (a chunk per invocation)."""
    tape.require_deltas("features", "the cooperative-vector gradients")
    frame = training_frame(push_constant_block(("count", "u32"), ("batch", "u32"), ("capacity", "u32"),
                                               ("parameters", "u32")))
    m, fn, u32 = frame.module, frame.main, frame.u32
    f16 = m.type_float(16)
    storage_buffer(frame, TAPE, f16, writable=False, name="tape")
    storage_buffer(frame, PARTIALS, frame.f32, writable=True, name="partials")
    storage_buffer(frame, ONES, f16, writable=False, name="ones")

    def array(binding, scalar):
        pointer = m.type_pointer("StorageBuffer", m.type_runtime_array(scalar, stride=m.scalar_widths(scalar).pop() // 8))
        return fn.emit("OpAccessChain", pointer, frame.buffers[binding], frame.zero)

    tape_array, partials_array, ones_array = array(TAPE, f16), array(PARTIALS, frame.f32), array(ONES, f16)
    half = m.enum_constant("ComponentType", "Float16NV")
    no = m.constant(frame.bool, False)
    row, chunk = frame.sample, fn.emit("OpCompositeExtract", u32, frame.invocation_id, 1, name="chunk")
    capacity, batch = frame.push_value("capacity"), frame.push_value("batch")
    chunk_partials = fn.emit("OpIMul", u32, chunk, frame.push_value("parameters"))
    chunk_partial_groups = fn.emit("OpShiftRightLogical", u32, chunk_partials, frame.uint(2))

    def vector(scalar, size):
        return m.type_cooperative_vector_nv(scalar, size)

    def mul(*operands):
        return fn.emit("OpIMul", u32, *operands)

    def add(*operands):
        return fn.emit("OpIAdd", u32, *operands)

    def times(matrix, offset, delta, rows, layout, stride):
        product = fn.emit("OpCooperativeVectorMatrixMulNV", vector(f16, rows), delta, half, matrix, offset, half,
                          frame.uint(rows), frame.uint(sub),
                          m.enum_constant("CooperativeVectorMatrixLayout", layout), no, frame.uint(stride))
        return fn.emit("OpFConvert", vector(frame.f32, rows), product)

    # Byte offsets are counted in 16-byte groups and multiplied last, so the compiler can prove the alignment the
    # vector loads, stores and matrix reads need: the capacity, `sub` and every padded width are whole groups.
    def aligned(groups, group_bytes):
        return mul(groups, frame.uint(group_bytes))

    capacity_groups = fn.emit("OpShiftRightLogical", u32, capacity, frame.uint(3))
    starts = row_starts(parameters)
    for index, layer in enumerate(parameters.layers):
        inside = fn.emit("OpLogicalAnd", frame.bool,
                         fn.emit("OpUGreaterThanEqual", frame.bool, row, frame.uint(starts[index])),
                         fn.emit("OpULessThan", frame.bool, row, frame.uint(starts[index] + layer.rows)))
        with fn.if_(inside):
            k = layer.cols
            r = fn.emit("OpISub", u32, row, frame.uint(starts[index]))
            weights = fn.variable(vector(frame.f32, k), initializer=m.constant(vector(frame.f32, k), [0.0] * k))
            bias = fn.variable(vector(frame.f32, ONES_ROWS),
                               initializer=m.constant(vector(frame.f32, ONES_ROWS), [0.0] * ONES_ROWS))
            delta_row = mul(add(frame.uint(tape.delta_start(index)), r), capacity_groups)
            input_region = mul(frame.uint(tape.input_start(index)), capacity_groups)
            with fn.for_range(frame.zero, frame.uint(subs_per_chunk)) as s:
                first_groups = add(mul(chunk, frame.uint(sub * subs_per_chunk // 8)), mul(s, frame.uint(sub // 8)))
                first = mul(first_groups, frame.uint(8))
                with fn.if_(fn.emit("OpULessThan", frame.bool, first, batch)):
                    delta = fn.emit("OpCooperativeVectorLoadNV", vector(f16, sub), tape_array,
                                    aligned(add(delta_row, first_groups), 16))
                    block = aligned(add(input_region, mul(first, frame.uint(k // 8))), 16)
                    for variable, product in (
                            (weights, times(tape_array, block, delta, k, "ColumnMajorNV", 2 * k)),
                            (bias, times(ones_array, frame.zero, delta, ONES_ROWS, "RowMajorNV", 2 * sub))):
                        fn.emit("OpStore", variable, fn.emit("OpFAdd", m.type_of(product),
                                                             fn.emit("OpLoad", m.type_of(product), variable), product))
            weight_groups = add(chunk_partial_groups, add(frame.uint(layer.weight_offset // 4), mul(r, frame.uint(k // 4))))
            fn.emit("OpCooperativeVectorStoreNV", partials_array, aligned(weight_groups, 16),
                    fn.emit("OpLoad", vector(frame.f32, k), weights))
            bias_total = fn.emit("OpCompositeExtract", frame.f32, fn.emit("OpLoad", vector(frame.f32, ONES_ROWS), bias),
                                 0)
            bias_at = add(chunk_partials, add(frame.uint(layer.bias_offset), r))
            fn.emit("OpStore", frame.element_pointer(PARTIALS, bias_at, frame.f32), bias_total)
    return finish("coopvec weight gradients", frame, 3, FEATURES)
