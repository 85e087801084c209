"""Lowerings of the weight-gradient accumulations (`accumulate_outer`, `accumulate_sum`) on the coopvec target, and of
a trained grid's (`accumulate_encoding`: with the emitter's `table_atomics`).

The accumulators are entries of the weight buffer (binding 0, writable when a program accumulates), at the offsets
of the program's weight image, in float16 (the H100 accumulates training sums only in float16). Two methods,
told apart by the layout of the weight-gradient entries:

- "training_optimal": every sample adds its own delta x input with OpCooperativeVectorOuterProductAccumulateNV
  and its delta with OpCooperativeVectorReduceSumAccumulateNV (both atomic adds in device memory).
- "row_major" (reduce first): the workgroup's samples put their deltas and inputs in workgroup memory; invocation j
  then sums rows j, j + W, ... of the workgroup's delta x input (and the bias) over its W samples in float32, and
  adds each row once with OpCooperativeVectorReduceSumAccumulateNV, W times fewer device-memory adds. (The outer
  product instruction cannot target workgroup memory in Vulkan, and a sum of outer products is no outer product.)
  Every invocation of a workgroup takes part: the training session runs whole workgroups of real or masked samples.
"""

from __future__ import annotations

from coopnn.backends.coopvec.target import CoopvecEmitter, lowers
from coopnn.errors import CompileError
from coopnn.layouts.pack import Entry
from coopnn.shaders.kernel.program import Instr
from coopnn.shaders.spirv.ops import Ops
from coopnn.shaders.targets.encodings.grid import scatter_gradient
from coopnn.shaders.targets.encodings.writer import EncodingWriter

REDUCE_FIRST_LAYOUT = "row_major"


def reduces_first(emitter: CoopvecEmitter) -> bool:
    """Whether the program's weight-gradient accumulators are row-major (the reduce-first method)."""
    return any(emitter.packed.entry(p.name).layout == REDUCE_FIRST_LAYOUT
               for p in emitter.program.params_of("gradient") if len(p.shape) == 2)


@lowers("accumulate_outer")
def accumulate_outer(e: CoopvecEmitter, instr: Instr) -> None:
    delta, x = (e.held[a] for a in instr.args[:2])
    entry = e.packed.entry(instr.args[2])
    rows, columns = entry.shape
    if entry.layout == REDUCE_FIRST_LAYOUT:
        WorkgroupSums.of(e).accumulate(entry, [(delta, rows), (x, columns)])
        return
    m = e.m
    Ops(e.fn).vector_outer_product_accumulate(e.array_pointer(0), e.uint(entry.offset),
                                              e.forms.padded_vector(delta, rows), e.forms.padded_vector(x, columns),
                                              m.enum_constant("CooperativeVectorMatrixLayout", "TrainingOptimalNV"),
                                              m.enum_constant("ComponentType", "Float16NV"))


@lowers("accumulate_sum")
def accumulate_sum(e: CoopvecEmitter, instr: Instr) -> None:
    delta = e.held[instr.args[0]]
    entry = e.packed.entry(instr.args[1])
    if reduces_first(e):
        WorkgroupSums.of(e).accumulate(entry, [(delta, entry.shape[0])])
        return
    Ops(e.fn).vector_reduce_sum_accumulate(e.array_pointer(0), e.uint(entry.offset),
                                           e.forms.padded_vector(delta, entry.shape[0]))


class WorkgroupSums:
    """The reduce-first method's workgroup memory (float16 rows of W samples) and its sums."""

    def __init__(self, e: CoopvecEmitter):
        self.e, m = e, e.m
        self.ops = Ops(e.fn)
        self.width = e.frame.workgroup_size[0]
        # Room for the widest accumulation: a layer's delta and input side by side, per sample.
        widest = max(sum(p.shape) + 16 for p in e.program.params_of("gradient"))
        u32 = e.frame.u32
        self.memory = m.global_variable("Workgroup", m.type_array(e.f16, m.constant(u32, self.width * widest)),
                                        name="samples")
        self.row_sums = m.global_variable("Workgroup", m.type_array(e.f32, m.constant(u32, widest)), name="row_sums")
        local = m.builtin_input("LocalInvocationIndex", u32)
        self.local = self.ops.load(u32, local)

    @classmethod
    def of(cls, e: CoopvecEmitter) -> "WorkgroupSums":
        if not hasattr(e, "workgroup_sums"):
            e.workgroup_sums = cls(e)
        return e.workgroup_sums

    def pointer(self, array, scalar, index):
        return self.ops.access_chain(self.e.m.type_pointer("Workgroup", scalar), array, index)

    def accumulate(self, entry: Entry, vectors) -> None:
        """Add the workgroup's sum of vectors[0] x vectors[1] (rows of `entry`, row-major), or of vectors[0] (a
        bias vector), to the accumulator `entry`; vectors are (held value, padded size)."""
        e, fn, ops, u32, f32 = self.e, self.e.fn, self.ops, self.e.frame.u32, self.e.f32
        weights = e.array_pointer(0)  # made here, where it dominates the branches below
        sizes = [size for _, size in vectors]
        stride = sum(sizes)  # halves per sample in workgroup memory: the delta, then the input
        self.e.fn.barrier()  # the previous accumulation's reads are done
        base = ops.int_mul(u32, self.local, e.uint(stride))
        offset = 0
        for held, size in vectors:
            components = e.forms.components(held, "f16")
            zero = e.forms.constant("f16", 0.0)
            for i, value in enumerate(components + [zero] * (size - held.size)):
                index = ops.int_add(u32, base, e.uint(offset + i))
                ops.store(self.pointer(self.memory, e.f16, index), value)
            offset += size
        self.e.fn.barrier()
        rows = sizes[0]
        outer = len(vectors) == 2
        for first in range(0, rows, self.width):
            row = ops.int_add(u32, self.local, e.uint(first))
            with fn.if_(ops.uint_less(e.boolean, row, e.uint(rows))):
                total = self.row_total(row, stride, sizes[1] if outer else 0)
                if outer:
                    at = ops.int_add(u32, e.uint(entry.offset), ops.int_mul(u32, row, e.uint(2 * sizes[1])))
                    ops.vector_reduce_sum_accumulate(weights, at,
                                                     ops.float_convert(e.forms.vector_type("f16", sizes[1]), total))
                else:
                    ops.store(self.pointer(self.row_sums, f32, row), total)
        if outer:
            return
        self.e.fn.barrier()
        with fn.if_(ops.int_equal(e.boolean, self.local, e.frame.zero)):
            sums = [ops.float_convert(e.f16, ops.load(f32, self.pointer(self.row_sums, f32, e.uint(i))))
                    for i in range(rows)]
            ops.vector_reduce_sum_accumulate(weights, e.uint(entry.offset),
                                             ops.construct(e.forms.vector_type("f16", rows), *sums))

    def row_total(self, row, stride: int, columns: int):
        """Sum over the workgroup's samples of delta[row] * input (a float32 cooperative vector of `columns`), or of
        delta[row] (a float32 scalar) when `columns` is 0."""
        e, fn, ops, m, f32 = self.e, self.e.fn, self.ops, self.e.m, self.e.f32
        u32 = e.frame.u32
        kind = e.forms.vector_type("f32", columns) if columns else f32
        total = fn.variable(kind, initializer=m.constant(kind, [0.0] * columns) if columns else m.constant(f32, 0.0))
        with fn.for_range(e.frame.zero, e.uint(self.width)) as sample:
            base = ops.int_mul(u32, sample, e.uint(stride))

            def half(offset):
                index = ops.int_add(u32, base, offset)
                return ops.float_convert(f32, ops.load(e.f16, self.pointer(self.memory, e.f16, index)))

            weight = half(row)
            term = weight
            if columns:
                first = stride - columns
                inputs = ops.construct(kind, *[half(e.uint(first + k)) for k in range(columns)])
                term = ops.vector_times_scalar(kind, inputs, weight)
            ops.store(total, ops.float_add(kind, ops.load(kind, total), term))
        return ops.load(kind, total)


@lowers("accumulate_encoding")
def accumulate_encoding(e: CoopvecEmitter, instr: Instr) -> None:
    """Adds this sample's gradient of a grid's tables (the vertices' weights times the gradient in the grid's outputs,
    float32) with the emitter's table atomics: samples share table entries."""
    x, delta, target = instr.args
    encoding = instr.attrs["encoding"]
    if encoding.otype != "Grid":
        raise CompileError(f"the coopvec target trains the tables of grids, not of {encoding.describe()}")
    e.features |= e.table_atomics.features
    binding = e.binding_of[e.program.param(target).graph_name or target]
    xs, deltas = e.forms.components(e.held[x], "f32"), e.forms.components(e.held[delta], "f32")
    scatter_gradient(EncodingWriter(e.m, e.fn), encoding, xs, deltas,
                     e.table_atomics.adds(e, binding, instr.attrs["start"], encoding))
