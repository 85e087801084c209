"""The portable target: plain SPIR-V 1.6 for any Vulkan 1.3 device, one invocation per sample.

Each kernel vector is a private (Function-storage) array; instructions become loops over its components, `gemv`
a pair of loops reading the weight buffer, `gather` unrolled copies. Arithmetic is float32; `weights="fp16"`
stores weights as float16 (StorageBuffer16BitAccess, Float16) and widens them on load. The 8-bit float formats
(weights with row scales) read the weight buffer as 32-bit words (`narrow_floats`) and follow their float16
arithmetic step by step (`coopnn.layouts.formats.emulation`): inputs, each Linear's input, product, scaled
product, biased result and the outputs rounded to float16. int8 (a format that quantizes
inputs) packs each Linear as one entry and runs its integer arithmetic (`integer_linear`). The block formats (q8_0,
q4_0) are read as 32-bit words and decoded weight by weight (`block_words`), in float32 arithmetic. Maxima, minima
and clamps are written with ordered comparisons so that NaN propagates as numpy propagates it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from coopnn.errors import CompileError
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import WeightImage, pack
from coopnn.backends.portable.integer_linear import integer_gemv, pack_layers
from coopnn.registry import registrar
from coopnn.shaders.kernel.program import Instr, KernelProgram
from coopnn.shaders.targets.base import Binary, ShaderFrame, bindings_of, push_constants_of
from coopnn.shaders.targets.block_words import BlockWords
from coopnn.shaders.targets.encodings.grid import SCATTER_FEATURES, float32_atomic_adds, scatter_gradient
from coopnn.shaders.targets.encodings.registry import emit_encoding
from coopnn.shaders.targets.encodings.writer import EncodingWriter
from coopnn.shaders.targets.integer_words import IntegerWords
from coopnn.shaders.targets.narrow_floats import NarrowFloats
from coopnn.shaders.targets.scalar_math import ARITHMETIC, COMPARISONS, GLSL_UNARY, LOGICAL, TANH_LIMIT, numpy_pow

# kernel instruction -> its lowering, an emitter method taking the instruction; every instruction of the table
# (`coopnn.shaders.kernel.ops`) has one
LOWERINGS: dict[str, Callable[["PortableEmitter", Instr], None]] = {}
lowers = registrar(LOWERINGS)  # @lowers(kernel instruction, ...)


def componentwise(*ops: str):
    """@componentwise(kernel instruction, ...) on an emitter method computing one result component from the
    operands' components (emitter, instr, xs): registered as the lowering that loops it over the components."""

    def register(scalar):
        def lower(emitter: "PortableEmitter", instr: Instr) -> None:
            emitter.elementwise(instr, lambda i: scalar(emitter, instr, [emitter.component(a, i) for a in instr.args]))

        lowers(*ops)(lower)
        return scalar

    return register


def pack_program(program: KernelProgram, weights: WeightFormat) -> WeightImage:
    """The program's matrices and vectors packed for the portable target in the `weights` format."""
    if weights.input_quantization is not None:
        return pack_layers(program, weights)
    return pack(program.constants, {p.name: p.role for p in program.params_of("matrix", "vector")}, weights)


class PortableEmitter:
    def __init__(self, program: KernelProgram, weights: WeightFormat, workgroup_size: int,
                 packed: WeightImage | None):
        self.program = program
        self.bindings = bindings_of(program)
        self.push_constants = push_constants_of(program)
        self.weights = weights
        self.frame = ShaderFrame(self.bindings, weights.bits, workgroup_size, self.push_constants)
        self.frame.draw_rows()
        self.m, self.fn = self.frame.module, self.frame.main
        self.packed = packed if packed is not None else pack_program(program, weights)
        self.itemsize = weights.bits // 8
        # the float16 arithmetic of a scaled format (one that quantizes inputs has an integer arithmetic instead)
        self.scaled = weights.row_scales is not None and weights.input_quantization is None
        self.narrow = NarrowFloats(self.frame) if self.frame.weight_words else None
        self.binding_of = {b.name: b.index for b in self.bindings if b.role != "weights"}  # graph value or param
        self.arrays: dict[str, object] = {}  # kernel value -> Function-storage array variable
        self.splats: dict[str, object] = {}  # kernel value -> scalar constant id
        self.types = program.value_types()
        self.features: set[str] = {"vulkanMemoryModel"}  # the device features the lowerings need

    # ----- values ---------------------------------------------------------------------------------------------------

    def scalar_type(self, value: str):
        return self.frame.bool if self.types[value].dtype == "bool" else self.frame.f32

    def new_array(self, value: str):
        t = self.types[value]
        element = self.frame.bool if t.dtype == "bool" else self.frame.f32
        array = self.m.type_array(element, self.m.constant(self.frame.u32, t.size))
        self.arrays[value] = self.fn.variable(array, name=f"v{value}")
        return self.arrays[value]

    def component(self, value: str, index):
        if value in self.splats:
            return self.splats[value]
        t = self.scalar_type(value)
        pointer = self.fn.ops.access_chain(self.m.type_pointer("Function", t), self.arrays[value], index)
        return self.fn.ops.load(t, pointer)

    def store_component(self, value: str, index, x) -> None:
        pointer = self.fn.ops.access_chain(self.m.type_pointer("Function", self.scalar_type(value)),
                                           self.arrays[value], index)
        self.fn.ops.store(pointer, x)

    def f32(self, x: float):
        return self.m.constant(self.frame.f32, float(x))

    def weight(self, param: str, index):
        """Element `index` (u32 id, relative to the entry) of a constant parameter, widened to float32."""
        entry = self.packed.entry(param)
        if self.narrow:
            storage = weight_format(entry.dtype).storage
            if storage == np.float32:  # the constant vectors of int8
                return IntegerWords(self.frame).float32(entry.offset, index)
            return self.narrow.read(entry.offset, storage, index)
        base = self.fn.ops.int_add(self.frame.u32, self.frame.uint(entry.offset // self.itemsize), index)
        raw = self.fn.ops.load(self.frame.weight_scalar,
                               self.frame.element_pointer(0, base, self.frame.weight_scalar))
        return raw if self.itemsize == 4 else self.fn.ops.float_convert(self.frame.f32, raw)

    def fp16(self, x):
        """`x` rounded to float16 where the format's arithmetic is float16, else `x`."""
        return self.narrow.round_fp16(x) if self.scaled else x

    def elementwise(self, instr: Instr, compute) -> None:
        """result[i] = compute(i) over the result's components."""
        self.new_array(instr.result)
        with self.fn.for_range(self.frame.zero, self.frame.uint(instr.type.size)) as i:
            self.store_component(instr.result, i, compute(i))

    # ----- scalar helpers -------------------------------------------------------------------------------------------

    def select(self, cond, a, b, t=None):
        return self.fn.ops.select(t or self.frame.f32, cond, a, b)

    def max(self, a, b, b_is_number: bool):
        """numpy's maximum: NaN if either operand is NaN."""
        larger = self.select(self.fn.ops.float_less(self.frame.bool, a, b), b, a)
        if b_is_number:
            return larger
        return self.select(self.fn.ops.is_nan(self.frame.bool, b), b, larger)

    def min(self, a, b, b_is_number: bool):
        smaller = self.select(self.fn.ops.float_greater(self.frame.bool, a, b), b, a)
        if b_is_number:
            return smaller
        return self.select(self.fn.ops.is_nan(self.frame.bool, b), b, smaller)

    def glsl(self, name: str, *args):
        return self.fn.ext_inst(self.frame.f32, name, *args)

    # ----- instructions ---------------------------------------------------------------------------------------------

    def emit(self, instr: Instr) -> None:
        lowering = LOWERINGS.get(instr.op)
        if lowering is None:
            raise CompileError(f"the portable target has no lowering for kernel instruction {instr.op!r}")
        lowering(self, instr)

    @lowers("constant")
    def constant(self, instr: Instr) -> None:
        value = instr.attrs["value"]
        self.splats[instr.result] = (self.m.constant(self.frame.bool, bool(value)) if instr.type.dtype == "bool"
                                     else self.f32(value))

    @lowers("gather")
    def gather(self, instr: Instr) -> None:
        self.new_array(instr.result)
        for j, (src, c) in enumerate(instr.attrs["index"]):
            self.store_component(instr.result, self.frame.uint(j), self.component(instr.args[src], self.frame.uint(c)))

    @lowers("uniform")
    def uniform(self, instr: Instr) -> None:
        value = self.frame.uniform_value(instr.attrs["name"])  # loaded here, where it dominates every later use
        self.elementwise(instr, lambda i: value)

    @lowers("accumulate_outer", "accumulate_sum")
    def accumulate(self, instr: Instr) -> None:
        raise CompileError(f"the portable target cannot lower {instr.op!r}: accumulating weight gradients in the step "
                           "kernel (the outer-product method) needs cooperative-vector training (the coopvec backend)")

    @lowers("sample_mask")
    def sample_mask(self, instr: Instr) -> None:
        inside = self.fn.ops.uint_less(self.frame.bool, self.frame.sample, self.frame.push_value("batch"))
        self.elementwise(instr, lambda i: self.select(inside, self.f32(1.0), self.f32(0.0)))

    @componentwise(*ARITHMETIC)
    def arithmetic(self, instr: Instr, xs: list):
        return ARITHMETIC[instr.op](self.fn.ops, self.frame.f32, *xs)

    @componentwise(*LOGICAL)
    def logical(self, instr: Instr, xs: list):
        return LOGICAL[instr.op](self.fn.ops, self.frame.bool, *xs)

    @componentwise(*COMPARISONS)
    def comparison(self, instr: Instr, xs: list):
        return COMPARISONS[instr.op](self.fn.ops, self.frame.bool, *xs)

    @componentwise(*GLSL_UNARY)
    def glsl_unary(self, instr: Instr, xs: list):
        return self.glsl(GLSL_UNARY[instr.op], xs[0])

    @componentwise("max")
    def maximum(self, instr: Instr, xs: list):
        return self.max(xs[0], xs[1], instr.args[-1] in self.splats)

    @componentwise("min")
    def minimum(self, instr: Instr, xs: list):
        return self.min(xs[0], xs[1], instr.args[-1] in self.splats)

    @componentwise("pow")
    def power(self, instr: Instr, xs: list):
        return numpy_pow(self.fn, self.frame.f32, self.frame.bool, self.glsl, self.f32, *xs)

    @componentwise("positive")
    def positive(self, instr: Instr, xs: list):
        above = self.fn.ops.float_greater(self.frame.bool, xs[0], self.f32(0.0))
        return self.select(above, self.f32(1.0), self.f32(0.0))

    @componentwise("neg")
    def negate(self, instr: Instr, xs: list):
        return self.fn.ops.float_negate(self.frame.f32, xs[0])

    @componentwise("not")
    def logical_not(self, instr: Instr, xs: list):
        return self.fn.ops.logical_not(self.frame.bool, xs[0])

    @componentwise("tanh")
    def tanh(self, instr: Instr, xs: list):
        limit = self.f32(TANH_LIMIT)
        clamped = self.min(self.max(xs[0], self.f32(-TANH_LIMIT), True), limit, True)
        return self.glsl("Tanh", clamped)

    @componentwise("select")
    def choose(self, instr: Instr, xs: list):
        return self.select(xs[0], xs[1], xs[2], self.scalar_type(instr.args[1]))

    @componentwise("cast")
    def cast(self, instr: Instr, xs: list):
        if instr.type.dtype == "bool":
            return self.fn.ops.float_not_equal(self.frame.bool, xs[0], self.f32(0.0))
        return self.select(xs[0], self.f32(1.0), self.f32(0.0))

    def row_base(self, row, features: int):
        """The first element of row `row` (a u32 id) of an array of `features` values a row."""
        return self.fn.ops.int_mul(self.frame.u32, row, self.frame.uint(features))

    @lowers("load")
    def load(self, instr: Instr) -> None:
        param = self.program.param(instr.args[0])
        if param.role == "input":
            binding = self.binding_of[param.graph_name]
            base = self.row_base(self.frame.data_row, param.shape[0])

            def read(i):
                index = self.fn.ops.int_add(self.frame.u32, base, i)
                return self.fp16(self.fn.ops.load(self.frame.f32, self.frame.element_pointer(binding, index)))

            self.elementwise(instr, read)
        else:
            self.elementwise(instr, lambda i: self.weight(param.name, i))

    @lowers("store")
    def store(self, instr: Instr) -> None:
        value, target = instr.args
        param = self.program.param(target)
        binding = self.binding_of[param.graph_name or param.name]
        if param.role == "tape":
            self.store_tape(instr, binding)
            return
        base = self.row_base(self.frame.sample, param.shape[0])
        with self.fn.for_range(self.frame.zero, self.frame.uint(param.shape[0])) as i:
            index = self.fn.ops.int_add(self.frame.u32, base, i)
            self.fn.ops.store(self.frame.element_pointer(binding, index), self.fp16(self.component(value, i)))

    def store_tape(self, instr: Instr, binding: int) -> None:
        """Into the tape region of `instr.attrs` (`coopnn.shaders.training.layout`): sample-major or feature-major."""
        u32, value = self.frame.u32, instr.args[0]
        capacity = self.frame.push_value("capacity")
        region = self.fn.ops.int_mul(u32, capacity, self.frame.uint(instr.attrs["start"]))
        samples = instr.attrs["layout"] == "samples"
        if samples:
            base = self.fn.ops.int_add(u32, region, self.row_base(self.frame.sample, instr.attrs["width"]))
        else:
            base = self.fn.ops.int_add(u32, region, self.frame.sample)
        with self.fn.for_range(self.frame.zero, self.frame.uint(self.types[value].size)) as i:
            step = i if samples else self.fn.ops.int_mul(u32, i, capacity)
            index = self.fn.ops.int_add(u32, base, step)
            self.fn.ops.store(self.frame.element_pointer(binding, index), self.component(value, i))

    @lowers("gemv")
    def gemv(self, instr: Instr) -> None:
        """result[r] = bias[r] + sum over c of W[r, c] x[c], with W's transpose when `transpose` is set."""
        if self.weights.input_quantization is not None:
            integer_gemv(self, instr)
            return
        if self.scaled:
            self.scaled_gemv(instr)
            return
        matrix, x = instr.args[0], instr.args[1]
        rows, cols = self.program.param(matrix).shape
        blocks = None
        if self.weights.blocks is not None:
            if instr.attrs.get("transpose"):
                raise CompileError("the portable target trains in float32; block-quantized weights are for inference")
            blocks = BlockWords(self.frame, self.weights, self.packed.entry(matrix))
        # index of W[r, c] is r * row_step + c * col_step in the stored row-major matrix
        row_step, col_step = (1, cols) if instr.attrs.get("transpose") else (cols, 1)
        if instr.attrs.get("transpose"):
            rows, cols = cols, rows
        accumulator = self.fn.variable(self.frame.f32, name="acc")
        self.new_array(instr.result)
        u32, f32 = self.frame.u32, self.frame.f32
        with self.fn.for_range(self.frame.zero, self.frame.uint(rows)) as r:
            start = self.weight(instr.args[2], r) if len(instr.args) > 2 else self.f32(0.0)
            self.fn.ops.store(accumulator, start)
            row = self.fn.ops.int_mul(u32, r, self.frame.uint(row_step))
            with self.fn.for_range(self.frame.zero, self.frame.uint(cols)) as c:
                column = c if col_step == 1 else self.fn.ops.int_mul(u32, c, self.frame.uint(col_step))
                w = blocks.weight(r, c) if blocks else self.weight(matrix, self.fn.ops.int_add(u32, row, column))
                product = self.fn.ops.float_mul(f32, w, self.component(x, c))
                total = self.fn.ops.float_add(f32, self.fn.ops.load(f32, accumulator), product)
                self.fn.ops.store(accumulator, total)
            self.store_component(instr.result, r, self.fn.ops.load(f32, accumulator))

    def scaled_gemv(self, instr: Instr) -> None:
        """A Linear in a scaled format's float16 arithmetic (`coopnn.layouts.formats.emulation`, steps 1 to 3):
        p = fp16(sum of Q[r, c] fp16(x[c]) in column order), t = fp16(p * scale[r]), result = fp16(t + bias[r])."""
        if instr.attrs.get("transpose"):
            raise CompileError("the portable target trains in float32; 8-bit float weights are for inference")
        matrix, x = instr.args[0], instr.args[1]
        rows, cols = self.program.param(matrix).shape
        u32, f32 = self.frame.u32, self.frame.f32
        rounded = f"{instr.result}.x16"
        self.types[rounded] = self.types[x]
        self.new_array(rounded)
        with self.fn.for_range(self.frame.zero, self.frame.uint(cols)) as c:
            self.store_component(rounded, c, self.fp16(self.component(x, c)))
        entry = self.packed.entry(matrix)
        accumulator = self.fn.variable(f32, name="acc")
        self.new_array(instr.result)
        with self.fn.for_range(self.frame.zero, self.frame.uint(rows)) as r:
            self.fn.ops.store(accumulator, self.f32(0.0))
            row = self.fn.ops.int_mul(u32, r, self.frame.uint(cols))
            with self.fn.for_range(self.frame.zero, self.frame.uint(cols)) as c:
                # each product is exact in float32, so a fused multiply-add sums the same
                product = self.fn.ops.float_mul(f32, self.weight(matrix, self.fn.ops.int_add(u32, row, c)),
                                                self.component(rounded, c))
                self.fn.ops.store(accumulator,
                                  self.fn.ops.float_add(f32, self.fn.ops.load(f32, accumulator), product))
            scale = self.narrow.read(entry.scale_offset, self.weights.row_scales.storage, r)
            y = self.fp16(self.fn.ops.float_mul(f32, self.fp16(self.fn.ops.load(f32, accumulator)), scale))
            if len(instr.args) > 2:
                y = self.fp16(self.fn.ops.float_add(f32, y, self.weight(instr.args[2], r)))
            self.store_component(instr.result, r, y)

    @lowers("encode")
    def encode(self, instr: Instr) -> None:
        """The encoding's outputs for this sample (`coopnn.shaders.targets.encodings`), its parameter vector read
        from the weight buffer like any constant vector."""
        x, *params = instr.args
        if params and self.weights.input_quantization is not None:
            raise CompileError(f"the portable target reads the parameters of {instr.attrs['encoding'].describe()} "
                               f"with float32, float16, 8-bit float or block-format weights, not {self.weights.name}")
        read = (lambda element: self.weight(params[0], element)) if params else None
        xs = [self.component(x, self.frame.uint(i)) for i in range(self.types[x].size)]
        ys = emit_encoding(EncodingWriter(self.m, self.fn, read), instr.attrs["encoding"], xs)
        self.new_array(instr.result)
        for i, y in enumerate(ys):
            self.store_component(instr.result, self.frame.uint(i), y)

    @lowers("accumulate_encoding")
    def accumulate_encoding(self, instr: Instr) -> None:
        """Adds this sample's gradient of a grid's tables into the table gradient, element by element with float32
        atomics: samples read the same entries."""
        x, delta, target = instr.args
        encoding = instr.attrs["encoding"]
        if encoding.otype != "Grid":
            raise CompileError(f"the portable target trains the tables of grids, not of {encoding.describe()}")
        self.features |= SCATTER_FEATURES
        binding = self.binding_of[self.program.param(target).graph_name or target]
        xs = [self.component(x, self.frame.uint(i)) for i in range(self.types[x].size)]
        deltas = [self.component(delta, self.frame.uint(i)) for i in range(self.types[delta].size)]
        scatter_gradient(EncodingWriter(self.m, self.fn), encoding, xs, deltas,
                         float32_atomic_adds(self.frame, binding, instr.attrs["start"]))

    @lowers("reduce_sum", "reduce_max")
    def reduce(self, instr: Instr) -> None:
        group = instr.attrs["group"]
        source = instr.args[0]
        accumulator = self.fn.variable(self.frame.f32, name="acc")
        self.new_array(instr.result)
        u32, f32 = self.frame.u32, self.frame.f32
        is_sum = instr.op == "reduce_sum"
        with self.fn.for_range(self.frame.zero, self.frame.uint(instr.type.size)) as g:
            self.fn.ops.store(accumulator, self.f32(0.0 if is_sum else float("-inf")))
            first = self.fn.ops.int_mul(u32, g, self.frame.uint(group))
            with self.fn.for_range(self.frame.zero, self.frame.uint(group)) as j:
                x = self.component(source, self.fn.ops.int_add(u32, first, j))
                acc = self.fn.ops.load(f32, accumulator)
                total = self.fn.ops.float_add(f32, acc, x) if is_sum else self.max(acc, x, False)
                self.fn.ops.store(accumulator, total)
            self.store_component(instr.result, g, self.fn.ops.load(f32, accumulator))

    def compile(self) -> Binary:
        for instr in self.program.body:
            self.emit(instr)
        spirv = self.frame.finish()
        features = self.features | self.weights.shader_features
        return Binary("portable", spirv, "main", self.frame.workgroup_size, self.bindings, self.push_constants,
                      self.packed, frozenset(features), frozenset())


class PortableTarget:
    name = "portable"

    def compile(self, program: KernelProgram, weights: WeightFormat, workgroup_size: int = 64, *,
                packed: WeightImage | None = None) -> Binary:
        """SPIR-V for `program`, reading constants at the offsets of `packed` (row-major, in the `weights` format),
        or packed here when it is None."""
        return PortableEmitter(program, weights, workgroup_size, packed).compile()
