"""Weight gradients on the cooperative-vector target: sums over samples of the tape, as matrix-vector products.

Layer l's weight gradient is the sum over samples b of delta_l[:, b] times input_l[b, :]. Its row m over a run of
`SUB` samples is the product of the tape's input block (SUB samples x K, sample-major, which read column-major is a
K x SUB matrix) with the SUB deltas of row m (one contiguous vector: the tape keeps deltas feature-major), one
OpCooperativeVectorMatrixMulNV. The invocations of a subgroup take consecutive rows of one layer over the same
samples, so they multiply the same matrix and the driver runs them together on tensor cores: the reduction over
samples becomes a matrix product rather than one atomic outer product per sample, which is much slower. A bias row
is the same product with a matrix of ones.

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
from coopnn.shaders.training.indices import Indices
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
    kernel = _RowProducts(tape, sub, subs_per_chunk)
    starts = row_starts(parameters)
    for index, layer in enumerate(parameters.layers):
        kernel.layer(index, layer, starts[index])
    return finish("coopvec weight gradients", kernel.frame, 3, FEATURES)


class _RowProducts:
    """The module of `coopvec_gradient_shader` as it is built: its buffers and the values every layer's rows read."""

    def __init__(self, tape: TapeLayout, sub: int, subs_per_chunk: int):
        self.tape, self.sub, self.subs_per_chunk = tape, sub, subs_per_chunk
        self.frame = frame = training_frame(push_constant_block(("count", "u32"), ("batch", "u32"),
                                                                ("capacity", "u32"), ("parameters", "u32")))
        m, u32 = frame.module, frame.u32
        self.m, self.fn, self.u32 = m, frame.main, u32
        self.ix = ix = Indices(frame)
        self.ops = ix.ops
        self.f16 = f16 = m.type_float(16)
        storage_buffer(frame, TAPE, f16, writable=False, name="tape")
        storage_buffer(frame, PARTIALS, frame.f32, writable=True, name="partials")
        storage_buffer(frame, ONES, f16, writable=False, name="ones")
        self.tape_array, self.partials_array, self.ones_array = (self.array(TAPE, f16),
                                                                 self.array(PARTIALS, frame.f32),
                                                                 self.array(ONES, f16))
        self.half = m.enum_constant("ComponentType", "Float16NV")
        self.no = m.constant(frame.bool, False)
        self.row, self.chunk = frame.sample, self.ops.extract(u32, frame.invocation_id, 1, name="chunk")
        self.capacity, self.batch = frame.push_value("capacity"), frame.push_value("batch")
        self.chunk_partials = ix.mul(self.chunk, frame.push_value("parameters"))
        self.chunk_partial_groups = ix.shift_right(self.chunk_partials, frame.uint(2))
        self.capacity_groups = ix.shift_right(self.capacity, frame.uint(3))

    def array(self, binding: int, scalar):
        m = self.m
        stride = m.scalar_widths(scalar).pop() // 8
        pointer = m.type_pointer("StorageBuffer", m.type_runtime_array(scalar, stride=stride))
        return self.ops.access_chain(pointer, self.frame.buffers[binding], self.frame.zero)

    def vector(self, scalar, size: int):
        return self.m.type_cooperative_vector_nv(scalar, size)

    def aligned(self, groups, group_bytes: int):
        """Byte offsets counted in 16-byte groups and multiplied last, so the compiler can prove the alignment the
        vector loads, stores and matrix reads need: the capacity, `sub` and every padded width are whole groups."""
        return self.ix.mul(groups, self.frame.uint(group_bytes))

    def times(self, matrix, offset, delta, rows: int, layout: str, stride: int):
        """`delta` (a vector of `sub` float16 deltas) times the `rows` x `sub` matrix at `offset`, in float32."""
        m, uint = self.m, self.frame.uint
        product = self.ops.vector_matrix_mul(self.vector(self.f16, rows), delta, self.half, matrix, offset, self.half,
                                             uint(rows), uint(self.sub),
                                             m.enum_constant("CooperativeVectorMatrixLayout", layout), self.no,
                                             uint(stride))
        return self.ops.float_convert(self.vector(self.frame.f32, rows), product)

    def layer(self, index: int, layer, start: int) -> None:
        """Rows start.. of the row space: the layer's weight and bias gradient rows over the invocation's chunk."""
        frame, fn, uint = self.frame, self.fn, self.frame.uint
        with fn.if_(self.ix.within(self.row, start, start + layer.rows)):
            k = layer.cols
            r = self.ix.sub(self.row, uint(start))
            weights = fn.variable(self.vector(frame.f32, k), initializer=self.m.constant(self.vector(frame.f32, k),
                                                                                         [0.0] * k))
            bias = fn.variable(self.vector(frame.f32, ONES_ROWS),
                               initializer=self.m.constant(self.vector(frame.f32, ONES_ROWS), [0.0] * ONES_ROWS))
            self._sum_chunk(index, k, r, weights, bias)
            self._store(layer, k, r, weights, bias)

    def _sum_chunk(self, index: int, k: int, r, weights, bias) -> None:
        """Add the products of the chunk's runs of `sub` samples into `weights` and `bias` (row `r` of a layer of
        `k` inputs)."""
        fn, uint, mul, add, sub = self.fn, self.frame.uint, self.ix.mul, self.ix.add, self.sub
        delta_row = mul(add(uint(self.tape.delta_start(index)), r), self.capacity_groups)
        input_region = mul(uint(self.tape.input_start(index)), self.capacity_groups)
        with fn.for_range(self.frame.zero, uint(self.subs_per_chunk)) as s:
            first_groups = add(mul(self.chunk, uint(sub * self.subs_per_chunk // 8)), mul(s, uint(sub // 8)))
            first = mul(first_groups, uint(8))
            with fn.if_(self.ix.less(first, self.batch)):
                delta = self.ops.vector_load(self.vector(self.f16, sub), self.tape_array,
                                             self.aligned(add(delta_row, first_groups), 16))
                block = self.aligned(add(input_region, mul(first, uint(k // 8))), 16)
                for variable, product in (
                        (weights, self.times(self.tape_array, block, delta, k, "ColumnMajorNV", 2 * k)),
                        (bias, self.times(self.ones_array, self.frame.zero, delta, ONES_ROWS, "RowMajorNV", 2 * sub))):
                    kind = self.m.type_of(product)
                    self.ops.store(variable, self.ops.float_add(kind, self.ops.load(kind, variable), product))

    def _store(self, layer, k: int, r, weights, bias) -> None:
        """Row `r`'s sums into the chunk's partial gradients."""
        uint, mul, add, f32 = self.frame.uint, self.ix.mul, self.ix.add, self.frame.f32
        weight_groups = add(self.chunk_partial_groups, add(uint(layer.weight_offset // 4), mul(r, uint(k // 4))))
        self.ops.vector_store(self.partials_array, self.aligned(weight_groups, 16),
                              self.ops.load(self.vector(f32, k), weights))
        bias_total = self.ops.extract(f32, self.ops.load(self.vector(f32, ONES_ROWS), bias), 0)
        bias_at = add(self.chunk_partials, add(uint(layer.bias_offset), r))
        self.ops.store(self.frame.element_pointer(PARTIALS, bias_at, f32), bias_total)
