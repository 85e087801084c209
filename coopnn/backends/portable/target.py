"""The portable target: plain SPIR-V 1.6 for any Vulkan 1.3 device, one invocation per sample.

Each kernel vector is a private (Function-storage) array; instructions become loops over its components, `gemv`
a pair of loops reading the weight buffer, `gather` unrolled copies. Arithmetic is float32; `weights="fp16"`
stores weights as float16 (StorageBuffer16BitAccess, Float16) and widens them on load. Maxima, minima and clamps are
written with ordered comparisons so that NaN propagates as numpy propagates it.
"""

from __future__ import annotations

from coopnn.errors import CompileError
from coopnn.layouts.pack import WeightImage, pack
from coopnn.shaders.kernel.program import Instr, KernelProgram
from coopnn.shaders.targets.base import FP16_FEATURES, Binary, ShaderFrame, bindings_of, push_constants_of
from coopnn.shaders.targets.scalar_math import numpy_pow

_FLOAT_BINARY = {"add": "OpFAdd", "sub": "OpFSub", "mul": "OpFMul", "div": "OpFDiv"}
_BOOL_BINARY = {"and": "OpLogicalAnd", "or": "OpLogicalOr", "xor": "OpLogicalNotEqual"}
_COMPARE = {"cmp.lt": "OpFOrdLessThan", "cmp.le": "OpFOrdLessThanEqual", "cmp.gt": "OpFOrdGreaterThan",
            "cmp.ge": "OpFOrdGreaterThanEqual", "cmp.eq": "OpFOrdEqual"}
_GLSL_UNARY = {"abs": "FAbs", "exp": "Exp", "log": "Log", "sin": "Sin", "cos": "Cos", "sqrt": "Sqrt",
               "floor": "Floor", "ceil": "Ceil", "sign": "FSign"}
# tanh(±10) is ±1 in float32; clamping first keeps implementations that compute tanh through exp from inf/inf.
_TANH_LIMIT = 10.0

WEIGHT_WIDTH = {"fp32": 32, "fp16": 16}


def pack_program(program: KernelProgram, weights: str) -> WeightImage:
    """The program's matrices and vectors packed for the portable target in the `weights` format."""
    return pack(program.constants, {p.name: p.role for p in program.params_of("matrix", "vector")}, weights)


class PortableEmitter:
    def __init__(self, program: KernelProgram, weights: str, workgroup_size: int, packed: WeightImage | None):
        if weights not in WEIGHT_WIDTH:
            raise CompileError(f"the portable target stores weights as {' or '.join(WEIGHT_WIDTH)}, not {weights!r}")
        self.program = program
        self.bindings = bindings_of(program)
        self.push_constants = push_constants_of(program)
        self.frame = ShaderFrame(self.bindings, WEIGHT_WIDTH[weights], workgroup_size, self.push_constants)
        self.m, self.fn = self.frame.module, self.frame.main
        self.packed = packed if packed is not None else pack_program(program, weights)
        self.itemsize = WEIGHT_WIDTH[weights] // 8
        self.binding_of = {b.name: b.index for b in self.bindings if b.role != "weights"}  # graph value or param
        self.arrays: dict[str, object] = {}  # kernel value -> Function-storage array variable
        self.splats: dict[str, object] = {}  # kernel value -> scalar constant id
        self.types = program.value_types()

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
        pointer = self.fn.emit("OpAccessChain", self.m.type_pointer("Function", t), self.arrays[value], index)
        return self.fn.emit("OpLoad", t, pointer)

    def store_component(self, value: str, index, x) -> None:
        pointer = self.fn.emit("OpAccessChain", self.m.type_pointer("Function", self.scalar_type(value)),
                               self.arrays[value], index)
        self.fn.emit("OpStore", pointer, x)

    def f32(self, x: float):
        return self.m.constant(self.frame.f32, float(x))

    def weight(self, param: str, index):
        """Element `index` (u32 id, relative to the entry) of a constant parameter, widened to float32."""
        entry = self.packed.entry(param)
        base = self.fn.emit("OpIAdd", self.frame.u32, self.frame.uint(entry.offset // self.itemsize), index)
        raw = self.fn.emit("OpLoad", self.frame.weight_scalar,
                           self.frame.element_pointer(0, base, self.frame.weight_scalar))
        return raw if self.itemsize == 4 else self.fn.emit("OpFConvert", self.frame.f32, raw)

    def elementwise(self, instr: Instr, compute) -> None:
        """result[i] = compute(i) over the result's components."""
        self.new_array(instr.result)
        with self.fn.for_range(self.frame.zero, self.frame.uint(instr.type.size)) as i:
            self.store_component(instr.result, i, compute(i))

    # ----- scalar helpers -------------------------------------------------------------------------------------------

    def select(self, cond, a, b, t=None):
        return self.fn.emit("OpSelect", t or self.frame.f32, cond, a, b)

    def max(self, a, b, b_is_number: bool):
        """numpy's maximum: NaN if either operand is NaN."""
        larger = self.select(self.fn.emit("OpFOrdLessThan", self.frame.bool, a, b), b, a)
        if b_is_number:
            return larger
        return self.select(self.fn.emit("OpIsNan", self.frame.bool, b), b, larger)

    def min(self, a, b, b_is_number: bool):
        smaller = self.select(self.fn.emit("OpFOrdGreaterThan", self.frame.bool, a, b), b, a)
        if b_is_number:
            return smaller
        return self.select(self.fn.emit("OpIsNan", self.frame.bool, b), b, smaller)

    def glsl(self, name: str, *args):
        return self.fn.ext_inst(self.frame.f32, name, *args)

    def tanh(self, x):
        limit = self.f32(_TANH_LIMIT)
        clamped = self.min(self.max(x, self.f32(-_TANH_LIMIT), True), limit, True)
        return self.glsl("Tanh", clamped)

    def pow(self, a, b):
        return numpy_pow(self.fn, self.frame.f32, self.frame.bool, self.glsl, self.f32, a, b)

    # ----- instructions ---------------------------------------------------------------------------------------------

    def emit(self, instr: Instr) -> None:
        op, args = instr.op, instr.args
        if op == "constant":
            value = instr.attrs["value"]
            self.splats[instr.result] = (self.m.constant(self.frame.bool, bool(value)) if instr.type.dtype == "bool"
                                         else self.f32(value))
        elif op == "load":
            self.load(instr)
        elif op == "store":
            self.store(instr)
        elif op == "gemv":
            self.gemv(instr)
        elif op == "gather":
            self.new_array(instr.result)
            for j, (src, c) in enumerate(instr.attrs["index"]):
                self.store_component(instr.result, self.frame.uint(j), self.component(args[src], self.frame.uint(c)))
        elif op in ("reduce_sum", "reduce_max"):
            self.reduce(instr)
        elif op == "uniform":
            value = self.frame.push_value(instr.attrs["name"])  # loaded here, where it dominates every later use
            self.elementwise(instr, lambda i: value)
        elif op == "sample_mask":
            inside = self.fn.emit("OpULessThan", self.frame.bool, self.frame.sample, self.frame.push_value("batch"))
            self.elementwise(instr, lambda i: self.select(inside, self.f32(1.0), self.f32(0.0)))
        else:
            self.elementwise(instr, lambda i: self.scalar_op(instr, [self.component(a, i) for a in args]))

    def scalar_op(self, instr: Instr, xs: list):
        op, f32, boolean = instr.op, self.frame.f32, self.frame.bool
        if op in _FLOAT_BINARY:
            return self.fn.emit(_FLOAT_BINARY[op], f32, *xs)
        if op in _BOOL_BINARY:
            return self.fn.emit(_BOOL_BINARY[op], boolean, *xs)
        if op in _COMPARE:
            return self.fn.emit(_COMPARE[op], boolean, *xs)
        if op in _GLSL_UNARY:
            return self.glsl(_GLSL_UNARY[op], xs[0])
        number = instr.args[-1] in self.splats
        simple = {
            "max": lambda: self.max(xs[0], xs[1], number),
            "min": lambda: self.min(xs[0], xs[1], number),
            "pow": lambda: self.pow(xs[0], xs[1]),
            "neg": lambda: self.fn.emit("OpFNegate", f32, xs[0]),
            "not": lambda: self.fn.emit("OpLogicalNot", boolean, xs[0]),
            "tanh": lambda: self.tanh(xs[0]),
            "select": lambda: self.select(xs[0], xs[1], xs[2], self.scalar_type(instr.args[1])),
            "cast": lambda: self.cast(instr, xs[0]),
        }
        if op not in simple:
            raise CompileError(f"the portable target has no lowering for kernel instruction {op!r}")
        return simple[op]()

    def cast(self, instr: Instr, x):
        if instr.type.dtype == "bool":
            return self.fn.emit("OpFUnordNotEqual", self.frame.bool, x, self.f32(0.0))
        return self.select(x, self.f32(1.0), self.f32(0.0))

    def sample_base(self, features: int):
        return self.fn.emit("OpIMul", self.frame.u32, self.frame.sample, self.frame.uint(features))

    def load(self, instr: Instr) -> None:
        param = self.program.param(instr.args[0])
        if param.role == "input":
            binding = self.binding_of[param.graph_name]
            base = self.sample_base(param.shape[0])

            def read(i):
                index = self.fn.emit("OpIAdd", self.frame.u32, base, i)
                return self.fn.emit("OpLoad", self.frame.f32, self.frame.element_pointer(binding, index))

            self.elementwise(instr, read)
        else:
            self.elementwise(instr, lambda i: self.weight(param.name, i))

    def store(self, instr: Instr) -> None:
        value, target = instr.args
        param = self.program.param(target)
        binding = self.binding_of[param.graph_name or param.name]
        if param.role == "tape":
            self.store_tape(instr, binding)
            return
        base = self.sample_base(param.shape[0])
        with self.fn.for_range(self.frame.zero, self.frame.uint(param.shape[0])) as i:
            index = self.fn.emit("OpIAdd", self.frame.u32, base, i)
            self.fn.emit("OpStore", self.frame.element_pointer(binding, index), self.component(value, i))

    def store_tape(self, instr: Instr, binding: int) -> None:
        """Into the tape region of `instr.attrs` (`coopnn.shaders.training.layout`): sample-major or feature-major."""
        u32, value = self.frame.u32, instr.args[0]
        capacity = self.frame.push_value("capacity")
        region = self.fn.emit("OpIMul", u32, capacity, self.frame.uint(instr.attrs["start"]))
        samples = instr.attrs["layout"] == "samples"
        if samples:
            base = self.fn.emit("OpIAdd", u32, region, self.sample_base(instr.attrs["width"]))
        else:
            base = self.fn.emit("OpIAdd", u32, region, self.frame.sample)
        with self.fn.for_range(self.frame.zero, self.frame.uint(self.types[value].size)) as i:
            step = i if samples else self.fn.emit("OpIMul", u32, i, capacity)
            index = self.fn.emit("OpIAdd", u32, base, step)
            self.fn.emit("OpStore", self.frame.element_pointer(binding, index), self.component(value, i))

    def gemv(self, instr: Instr) -> None:
        """result[r] = bias[r] + sum over c of W[r, c] x[c], with W's transpose when `transpose` is set."""
        matrix, x = instr.args[0], instr.args[1]
        rows, cols = self.program.param(matrix).shape
        # index of W[r, c] is r * row_step + c * col_step in the stored row-major matrix
        row_step, col_step = (1, cols) if instr.attrs.get("transpose") else (cols, 1)
        if instr.attrs.get("transpose"):
            rows, cols = cols, rows
        accumulator = self.fn.variable(self.frame.f32, name="acc")
        self.new_array(instr.result)
        u32, f32 = self.frame.u32, self.frame.f32
        with self.fn.for_range(self.frame.zero, self.frame.uint(rows)) as r:
            start = self.weight(instr.args[2], r) if len(instr.args) > 2 else self.f32(0.0)
            self.fn.emit("OpStore", accumulator, start)
            row = self.fn.emit("OpIMul", u32, r, self.frame.uint(row_step))
            with self.fn.for_range(self.frame.zero, self.frame.uint(cols)) as c:
                column = c if col_step == 1 else self.fn.emit("OpIMul", u32, c, self.frame.uint(col_step))
                w = self.weight(matrix, self.fn.emit("OpIAdd", u32, row, column))
                product = self.fn.emit("OpFMul", f32, w, self.component(x, c))
                total = self.fn.emit("OpFAdd", f32, self.fn.emit("OpLoad", f32, accumulator), product)
                self.fn.emit("OpStore", accumulator, total)
            self.store_component(instr.result, r, self.fn.emit("OpLoad", f32, accumulator))

    def reduce(self, instr: Instr) -> None:
        group = instr.attrs["group"]
        source = instr.args[0]
        accumulator = self.fn.variable(self.frame.f32, name="acc")
        self.new_array(instr.result)
        u32, f32 = self.frame.u32, self.frame.f32
        is_sum = instr.op == "reduce_sum"
        with self.fn.for_range(self.frame.zero, self.frame.uint(instr.type.size)) as g:
            self.fn.emit("OpStore", accumulator, self.f32(0.0 if is_sum else float("-inf")))
            first = self.fn.emit("OpIMul", u32, g, self.frame.uint(group))
            with self.fn.for_range(self.frame.zero, self.frame.uint(group)) as j:
                x = self.component(source, self.fn.emit("OpIAdd", u32, first, j))
                acc = self.fn.emit("OpLoad", f32, accumulator)
                total = self.fn.emit("OpFAdd", f32, acc, x) if is_sum else self.max(acc, x, False)
                self.fn.emit("OpStore", accumulator, total)
            self.store_component(instr.result, g, self.fn.emit("OpLoad", f32, accumulator))

    def compile(self) -> Binary:
        for instr in self.program.body:
            self.emit(instr)
        spirv = self.frame.finish()
        # f16 weights declare OpTypeFloat 16, which needs Float16 (shaderFloat16) besides the 16-bit storage access
        features = {"vulkanMemoryModel"} | (FP16_FEATURES if self.itemsize == 2 else set())
        return Binary("portable", spirv, "main", self.frame.workgroup_size, self.bindings, self.push_constants,
                      self.packed, frozenset(features), frozenset())


class PortableTarget:
    name = "portable"
    default_weights = "fp32"

    def compile(self, program: KernelProgram, weights: str = "fp32", workgroup_size: int = 64, *,
                packed: WeightImage | None = None) -> Binary:
        """SPIR-V for `program`, reading constants at the offsets of `packed` (row-major, in the `weights` format),
        or packed here when it is None."""
        return PortableEmitter(program, weights, workgroup_size, packed).compile()
