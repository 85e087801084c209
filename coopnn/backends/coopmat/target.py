"""The coopmat target: the tile kernel on VK_KHR_cooperative_matrix alone (no tensor layouts, workgroup-scope
matrices or conversions that change a matrix's use), for the tensor cores of any vendor.

A work-group of `tile` invocations takes `tile` samples, one row each. Activations live in workgroup memory as
float16 rows, in two buffers a layer reads one of and writes the other. A layer's product is cut into M x N tiles of
its result, which the work-group's subgroups share out (tile t to subgroup t mod NumSubgroups): each accumulates
K-deep steps of A (activations, from workgroup memory) times B (the weights transposed: a column-major load of the
row-major matrix) onto its bias tile in float32, runs the stage's epilogue on the components it holds (the
epilogue is component-wise with splat constants, so which element a component is does not matter;
OpCooperativeMatrixLengthKHR says how many), and stores the float16 result back to workgroup memory. Each invocation
reads its own sample's inputs (rounded to float16, stage 0's epilogue applied; 0 past the batch) and writes its own
outputs, only where its sample is in the batch: ragged tails are handled by these guarded stores, never by padding the
user's data. Barriers separate the layers.

Weights are zero-padded matrices and bias tiles (`packing.py`). Padding columns of a product hold its epilogue of 0,
which the next layer's zero weights cancel; a stage whose epilogue of 0 is not finite (0 x inf) is refused. Numerics
are those of `coopnn.shaders.targets.tile_plan`.
"""

from __future__ import annotations

from dataclasses import dataclass

from coopnn.errors import CompileError
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import WeightImage, align_up
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.shaders.spirv import Id
from coopnn.shaders.targets.base import PUSH_CONSTANTS, Binary, ShaderFrame, bindings_of
from coopnn.shaders.targets.scalar_writer import ScalarWriter
from coopnn.shaders.targets.tile_epilogue import emit_stage
from coopnn.shaders.targets.tile_plan import Stage, TilePlan, plan_tiles
from coopnn.backends.coopmat.packing import pack_tiles

NAME = "coopmat"
FEATURES = frozenset({"cooperativeMatrix", "shaderFloat16", "storageBuffer16BitAccess", "vulkanMemoryModel"})
TILE = 64  # samples (and invocations) per work-group: a whole number of subgroups of 8 to 64 invocations
# Workgroup-memory accesses carry other invocations' values, so under the Vulkan memory model they are non-private:
# the barriers between layers make them available and visible.
SHARED = "NonPrivatePointer"


@dataclass(frozen=True)
class Shape:
    """The M x N x K of the subgroup-scope matrices: A is M x K, B K x N, the accumulator M x N."""

    m: int = 16
    n: int = 16
    k: int = 16

    @property
    def granularity(self) -> int:
        """What feature dimensions are padded to: a layer's width is the N of its product and the K of the next."""
        return max(self.n, self.k)

    def check(self) -> None:
        if self.granularity % self.n or self.granularity % self.k:
            raise CompileError(f"the {NAME} target takes shapes whose N and K divide each other, not {self}")


def shared_halves(plan: TilePlan, tile: int, shape: Shape) -> int:
    """Float16 elements of workgroup memory the kernel uses: two buffers of `tile` rows of the widest padded layer."""
    return 2 * tile * _stride(plan, shape)


def _stride(plan: TilePlan, shape: Shape) -> int:
    return max(align_up(s.width, shape.granularity) for s in plan.stages)


class CoopmatEmitter:
    def __init__(self, plan: TilePlan, tile: int, shape: Shape, packed: WeightImage):
        self.plan, self.tile, self.shape, self.packed = plan, tile, shape, packed
        self.bindings = bindings_of(plan.program)
        self.binding_of = {b.name: b.index for b in self.bindings}
        self.frame = frame = ShaderFrame(self.bindings, 16, tile, PUSH_CONSTANTS, bounds_check=False)
        m, fn = self.m, self.fn = frame.module, frame.main
        self.f16, self.u32 = m.type_float(16), frame.u32
        self.stride = _stride(plan, shape)
        self.activations = m.global_variable(
            "Workgroup", m.type_array(self.f16, m.constant(self.u32, shared_halves(plan, tile, shape))),
            name="activations")
        self.local = fn.emit("OpLoad", self.u32, m.builtin_input("LocalInvocationIndex", self.u32))
        self.subgroup = fn.emit("OpLoad", self.u32, m.builtin_input("SubgroupId", self.u32))
        self.subgroups = fn.emit("OpLoad", self.u32, m.builtin_input("NumSubgroups", self.u32))
        self.inside = fn.emit("OpULessThan", frame.bool, frame.sample, frame.push_value("count"), name="inside")
        self.writer = ScalarWriter(m, fn)
        self.row = self.op("OpIMul", self.local, self.stride)
        self.row_major = m.enum_constant("CooperativeMatrixLayout", "RowMajorKHR")
        self.column_major = m.enum_constant("CooperativeMatrixLayout", "ColumnMajorKHR")

    def op(self, opname: str, *operands: Id | int) -> Id:
        """A u32 instruction; ints become constants."""
        return self.fn.emit(opname, self.u32, *(self.frame.uint(o) if isinstance(o, int) else o for o in operands))

    def matrix(self, component: Id, rows: int, cols: int, use: str) -> Id:
        return self.m.type_cooperative_matrix_khr(component, "Subgroup", rows, cols, use)

    def shared(self, index: Id) -> Id:
        return self.fn.emit("OpAccessChain", self.m.type_pointer("Workgroup", self.f16), self.activations, index)

    def weight(self, param: str, element: Id | int) -> Id:
        first = self.packed.entry(param).offset // 2
        return self.frame.element_pointer(0, self.op("OpIAdd", element, first), self.f16)

    def barrier(self) -> None:
        m = self.m
        self.fn.emit("OpControlBarrier", m.enum_constant("Scope", "Workgroup"), m.enum_constant("Scope", "Workgroup"),
                     m.enum_constant("MemorySemantics", "AcquireRelease", "WorkgroupMemory"))

    def inputs(self) -> None:
        """This invocation's row of buffer 0: its sample's stage 0 (0 past the batch), then zeros to the padding."""
        fn, frame = self.fn, self.frame
        features = self.plan.input.shape[0]
        # the last sample stands in past the batch, so the read stays in the buffer; its value is then dropped
        sample = self.fn.ext_inst(self.u32, "UMin", frame.sample, self.op("OpISub", frame.push_value("count"), 1))
        base = self.op("OpIMul", sample, features)
        binding = self.binding_of[self.plan.input.graph_name]
        zero = self.writer.constant(0.0)
        with fn.for_range(frame.zero, frame.uint(features)) as j:
            x = fn.emit("OpLoad", frame.f32, frame.element_pointer(binding, self.op("OpIAdd", base, j)))
            y = emit_stage(self.writer, self.plan, self.plan.stages[0], x)
            kept = fn.emit("OpSelect", frame.f32, self.inside, y, zero)
            fn.emit("OpStore", self.shared(self.op("OpIAdd", self.row, j)), fn.emit("OpFConvert", self.f16, kept),
                    SHARED)
        self.zero_row(features, align_up(features, self.shape.granularity))

    def zero_row(self, start: int, stop: int) -> None:
        if start == stop:
            return
        fn = self.fn
        with fn.for_range(self.frame.uint(start), self.frame.uint(stop)) as j:
            fn.emit("OpStore", self.shared(self.op("OpIAdd", self.row, j)), self.m.constant(self.f16, 0.0), SHARED)

    def layer(self, index: int, stage: Stage, source: int, target: int) -> None:
        """Buffer `target` = stage `index` of the activations in buffer `source`, tile by tile over the subgroups."""
        fn, shape, f32 = self.fn, self.shape, self.frame.f32
        width, columns = align_up(stage.width, shape.granularity), align_up(stage.columns, shape.granularity)
        tiles = width // shape.n
        a_type = self.matrix(self.f16, shape.m, shape.k, "MatrixAKHR")
        b_type = self.matrix(self.f16, shape.k, shape.n, "MatrixBKHR")
        accumulator = self.matrix(f32, shape.m, shape.n, "MatrixAccumulatorKHR")
        halves = self.matrix(self.f16, shape.m, shape.n, "MatrixAccumulatorKHR")
        with fn.for_range(self.subgroup, self.frame.uint(self.tile // shape.m * tiles), self.subgroups) as task:
            r, c = self.op("OpUDiv", task, tiles), self.op("OpUMod", task, tiles)
            rows = self.op("OpIAdd", self.op("OpIMul", r, shape.m * self.stride), source * self.tile * self.stride)
            if stage.bias is not None:
                first = self.weight(stage.bias, self.op("OpIMul", c, shape.n))
                bias = fn.emit("OpCooperativeMatrixLoadKHR", halves, first, self.row_major, self.frame.uint(width))
                acc = fn.emit("OpFConvert", accumulator, bias)
            else:
                acc = self.m.constant_null(accumulator)
            weights = self.op("OpIMul", c, shape.n * columns)
            for k0 in range(0, columns, shape.k):
                a = fn.emit("OpCooperativeMatrixLoadKHR", a_type, self.shared(self.op("OpIAdd", rows, k0)),
                            self.row_major, self.frame.uint(self.stride), SHARED)
                tile = self.weight(stage.matrix, self.op("OpIAdd", weights, k0))
                b = fn.emit("OpCooperativeMatrixLoadKHR", b_type, tile, self.column_major, self.frame.uint(columns))
                acc = fn.emit("OpCooperativeMatrixMulAddKHR", accumulator, a, b, acc)
            if stage.epilogue:
                acc = self.epilogue(stage, acc, accumulator)
            out = self.op("OpIAdd", self.op("OpIAdd", self.op("OpIMul", r, shape.m * self.stride),
                                            target * self.tile * self.stride), self.op("OpIMul", c, shape.n))
            fn.emit("OpCooperativeMatrixStoreKHR", self.shared(out), fn.emit("OpFConvert", halves, acc),
                    self.row_major, self.frame.uint(self.stride), SHARED)
        self.barrier()

    def epilogue(self, stage: Stage, acc: Id, accumulator: Id) -> Id:
        """The stage on every component this invocation holds of `acc` (float32)."""
        fn, f32 = self.fn, self.frame.f32
        held = fn.variable(accumulator, name="held")
        fn.emit("OpStore", held, acc)
        count = fn.emit("OpCooperativeMatrixLengthKHR", self.u32, accumulator)
        with fn.for_range(self.frame.zero, count) as i:
            pointer = fn.emit("OpAccessChain", self.m.type_pointer("Function", f32), held, i)
            fn.emit("OpStore", pointer, emit_stage(self.writer, self.plan, stage, fn.emit("OpLoad", f32, pointer)))
        return fn.emit("OpLoad", accumulator, held)

    def outputs(self, source: int) -> None:
        """This invocation's outputs, from its row of buffer `source`, where its sample is in the batch."""
        fn, frame = self.fn, self.frame
        features = self.plan.output.shape[0]
        binding = self.binding_of[self.plan.output.graph_name]
        row = self.op("OpIAdd", self.row, source * self.tile * self.stride)
        base = self.op("OpIMul", frame.sample, features)
        with fn.if_(self.inside):
            with fn.for_range(frame.zero, frame.uint(features)) as j:
                value = fn.emit("OpLoad", self.f16, self.shared(self.op("OpIAdd", row, j)), SHARED)
                fn.emit("OpStore", frame.element_pointer(binding, self.op("OpIAdd", base, j)),
                        fn.emit("OpFConvert", frame.f32, value))

    def compile(self) -> bytes:
        self.inputs()
        self.barrier()
        for index, stage in enumerate(self.plan.products, start=1):
            self.layer(index, stage, (index - 1) % 2, index % 2)
        self.outputs(len(self.plan.products) % 2)
        return self.frame.finish()


def check_plan(plan: TilePlan, tile: int, shape: Shape) -> None:
    """CompileError unless the tile is whole M rows and every stage leaves its padding columns finite."""
    shape.check()
    if tile % shape.m:
        raise CompileError(f"the {NAME} target takes tiles of a whole number of {shape.m} samples (the matrices' "
                           f"rows), not {tile}")
    for stage in plan.stages[1:-1]:
        if align_up(stage.width, shape.granularity) != stage.width and not stage.finite_at_zero(plan.constants):
            raise CompileError(f"the {NAME} target cannot run kernel {plan.program.name!r}: the epilogue of the "
                               f"{stage.width}-wide layer %{stage.source} is not finite at 0, so its padding columns "
                               f"(to {align_up(stage.width, shape.granularity)}) would turn the next product into NaN "
                               "(the coopmat2 target masks them)")


class CoopmatTarget:
    name = NAME

    def compile(self, program: KernelProgram, weights: WeightFormat, workgroup_size: int = TILE, *,
                shape: Shape = Shape(), packed: WeightImage | None = None) -> Binary:
        """SPIR-V for `program` in tiles of `workgroup_size` samples (one per invocation) on M x N x K = `shape`
        matrices; CompileError when the program is not a chain of layers (`plan_tiles`) the shape can take."""
        plan = plan_tiles(program, NAME)
        check_plan(plan, workgroup_size, shape)
        packed = packed if packed is not None else pack_tiles(plan, weights, shape.granularity, shape.m)
        emitter = CoopmatEmitter(plan, workgroup_size, shape, packed)
        spirv = emitter.compile()
        return Binary(NAME, spirv, "main", emitter.frame.workgroup_size, emitter.bindings, PUSH_CONSTANTS, packed,
                      FEATURES, frozenset())
