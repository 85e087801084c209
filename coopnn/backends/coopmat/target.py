"""The coopmat target: the tile kernel on VK_KHR_cooperative_matrix alone (no tensor layouts, workgroup-scope
matrices or conversions that change a matrix's use), for the tensor cores of any vendor.

A work-group takes a tile of TILE samples with WORKGROUP_INVOCATIONS invocations: its local size is TILE along x (the
runtime dispatches a work-group per `workgroup_size[0]` samples) times as many rows along y as make up the
invocations, and no invocation stands for a sample. Activations live in workgroup memory as float16 rows, in two
buffers a layer reads one of and writes the other; a row is the widest padded layer plus ROW_PAD halves, so rows are
16-byte aligned and the 16-byte rows of one matrix load start on different banks.

- Inputs: the tile's block of the input buffer (TILE x features float32, contiguous) is copied by every invocation,
  consecutive invocations on consecutive elements (coalesced reads), rounded to float16 with stage 0's epilogue
  applied, 0 for samples past the batch; the padding columns are zeroed. Outputs go back the same way, only the
  elements of samples in the batch: ragged tails are handled by these guarded stores, never by padding the user's
  data.
- Products, column-owner: a layer's column tiles (N wide) are shared out over the subgroups (tile c to subgroup c
  mod NumSubgroups). A subgroup loads the bias tile and the K-deep B tiles of its column (the weights transposed: a
  column-major load of the row-major matrix) once, then runs every row tile (M samples) with an accumulator of its
  own, so the products of different row tiles are independent and overlap; each accumulates its K steps of A
  (activations, from workgroup memory) times B onto the bias in float32, in ascending K as ever, runs the stage's
  epilogue on the components it holds (the epilogue is component-wise with splat constants, so which element a
  component is does not matter; OpCooperativeMatrixLengthKHR says how many), and stores the float16 result into the
  other buffer. Barriers separate the layers.

Why this layout: a kernel of one sample an invocation, where every (row tile, column tile) task reloaded its B
tiles and ran one serial chain of products, with strided input and output per invocation, was many times slower
than coopvec (`bench/results/nvidia-h100-80gb-hbm3-2026-11-25-tile-targets.md`; this layout:
`...-2026-11-25-coopmat-column-owner.md`). Padding rows (ROW_PAD)
removes its bank conflicts; the layout above addresses the rest: more warps per work-group for the same workgroup
memory, B tiles loaded once per column, independent accumulators, coalesced input and output.

Weights are zero-padded matrices and bias tiles (`packing.py`). Padding columns of a product hold its epilogue of 0,
which the next layer's zero weights cancel; a stage whose epilogue of 0 is not finite (0 x inf) is refused. Numerics
are those of `coopnn.shaders.targets.tile_plan`.

The kernel's text form (`Program.text`, `text.py`) is this tile kernel in the tensor language's syntax: the
work-group's tile, its two activation buffers, the guarded copies and each layer's column tiles, B tiles, row tiles
and epilogue, printed from the plan, shape, row stride and packed weights the SPIR-V is emitted from.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from coopnn.errors import CompileError
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import WeightImage, align_up
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.shaders.spirv import Id
from coopnn.shaders.targets.base import PUSH_CONSTANTS, Binary, ShaderFrame, bindings_of
from coopnn.shaders.targets.held_matrix import HeldMatrix, components
from coopnn.shaders.targets.scalar_writer import ScalarWriter
from coopnn.shaders.targets.tile_epilogue import emit_stage
from coopnn.shaders.targets.tile_input import emit_input_stage
from coopnn.shaders.targets.tile_plan import Stage, TilePlan, plan_tiles
from coopnn.backends.coopmat.packing import pack_tiles
from coopnn.backends.coopmat.text import kernel_text
from coopnn.shaders.spirv.ops import Ops

NAME = "coopmat"
FEATURES = frozenset({"cooperativeMatrix", "shaderFloat16", "storageBuffer16BitAccess", "vulkanMemoryModel"})
TILE = 64  # samples per work-group: a whole number of the matrices' M rows
# Eight subgroups of 32 on NVIDIA: more warps per SM for the same workgroup memory, which made the two larger
# benchmark MLPs faster than 128 invocations did and none slower
# (`bench/results/nvidia-h100-80gb-hbm3-2026-11-27-tile-limits.md`). The backend takes fewer where the device's
# work-group limits are lower (`backend.workgroup_invocations`).
WORKGROUP_INVOCATIONS = 256
ROW_PAD = 8  # halves (16 bytes) past the widest layer in every activation row: rows start on different banks
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


def local_size(tile: int, invocations: int = WORKGROUP_INVOCATIONS) -> tuple[int, int, int]:
    """The work-group of a tile: `tile` along x (the samples a work-group takes, as the runtime dispatches) by as many
    rows as bring it to `invocations` (at least one)."""
    return tile, max(1, invocations // tile), 1


def shared_halves(plan: TilePlan, tile: int, shape: Shape) -> int:
    """Float16 elements of workgroup memory the kernel uses: two buffers of `tile` rows of `row_stride` halves."""
    return 2 * tile * row_stride(plan, shape)


def row_stride(plan: TilePlan, shape: Shape) -> int:
    """Halves from one activation row to the next: the widest padded layer and ROW_PAD."""
    return max(align_up(s.width, shape.granularity) for s in plan.stages) + ROW_PAD


class CoopmatEmitter:
    def __init__(self, plan: TilePlan, tile: int, shape: Shape, packed: WeightImage, invocations: int):
        self.plan, self.tile, self.shape, self.packed = plan, tile, shape, packed
        self.bindings = bindings_of(plan.program)
        self.binding_of = {b.name: b.index for b in self.bindings}
        size = local_size(tile, invocations)
        self.invocations = size[0] * size[1]
        self.frame = frame = ShaderFrame(self.bindings, 16, tile, PUSH_CONSTANTS, bounds_check=False)
        frame.workgroup_size = size  # the frame would give one invocation per sample: (tile, 1, 1)
        m, fn = self.m, self.fn = frame.module, frame.main
        self.f16, self.u32 = m.type_float(16), frame.u32
        self.stride = row_stride(plan, shape)
        # two variables, not one array: the loads of a layer's buffer and the stores into the other never alias
        buffer = m.type_array(self.f16, m.constant(self.u32, tile * self.stride))
        self.activations = tuple(m.global_variable("Workgroup", buffer, name=f"activations_{i}") for i in range(2))
        self.local = fn.ops.load(self.u32, m.builtin_input("LocalInvocationIndex", self.u32))
        uvec3 = m.type_vector(self.u32, 3)
        group = fn.ops.load(uvec3, m.builtin_input("WorkgroupId", uvec3))
        self.first = self.op(Ops.int_mul, fn.ops.extract(self.u32, group, 0), tile)
        self.subgroup = fn.ops.load(self.u32, m.builtin_input("SubgroupId", self.u32))
        self.subgroups = fn.ops.load(self.u32, m.builtin_input("NumSubgroups", self.u32))
        self.count = frame.push_value("count")
        self.writer = ScalarWriter(m, fn)
        self.row_major = m.enum_constant("CooperativeMatrixLayout", "RowMajorKHR")
        self.column_major = m.enum_constant("CooperativeMatrixLayout", "ColumnMajorKHR")

    def op(self, instruction, *operands: Id | int) -> Id:
        """A u32 instruction; ints become constants."""
        return instruction(self.fn.ops, self.u32, *(self.frame.uint(o) if isinstance(o, int) else o for o in operands))

    def matrix(self, component: Id, rows: int, cols: int, use: str) -> Id:
        return self.m.type_cooperative_matrix_khr(component, "Subgroup", rows, cols, use)

    def shared(self, buffer: int, index: Id | int) -> Id:
        index = self.frame.uint(index) if isinstance(index, int) else index
        return self.fn.ops.access_chain(self.m.type_pointer("Workgroup", self.f16), self.activations[buffer],
                                        index)

    def weight(self, param: str, element: Id | int) -> Id:
        first = self.packed.entry(param).offset // 2
        return self.frame.element_pointer(0, self.op(Ops.int_add, element, first), self.f16)

    @contextmanager
    def elements(self, columns: int) -> Iterator[tuple[Id, Id, Id]]:
        """A loop over the `tile` x `columns` elements of a row-major block, consecutive invocations on consecutive
        elements; yields (element, its sample in the tile, its column). Unrolled (the trip count is a constant), as that
        made the kernel faster with identical outputs (`bench/results/nvidia-h100-80gb-hbm3-2026-11-27-tile-limits.md`,
        its follow-up)."""
        frame = self.frame
        with self.fn.for_range(self.local, frame.uint(self.tile * columns), frame.uint(self.invocations),
                               control="Unroll") as element:
            yield element, self.op(Ops.uint_div, element, columns), self.op(Ops.uint_mod, element, columns)

    def input_stage(self) -> None:
        """Buffer 0 from a per-sample input stage (an encoding, say): invocation s < tile runs it for sample s of the
        tile (`tile_input`; 0 past the batch, whose last sample stands in for the reads) and writes its row, zeros to
        the padding."""
        fn, frame = self.fn, self.frame
        features, width = self.plan.input.shape[0], self.plan.stages[0].width
        binding = self.binding_of[self.plan.input.graph_name]
        with fn.if_(fn.ops.uint_less(frame.bool, self.local, frame.uint(self.tile))):
            inside = fn.ops.uint_less(frame.bool, self.op(Ops.int_add, self.first, self.local), self.count)
            row = self.fn.ext_inst(self.u32, "UMin", self.op(Ops.int_add, self.first, self.local),
                                   self.op(Ops.int_sub, self.count, 1))
            base = self.op(Ops.int_mul, row, features)
            xs = [fn.ops.load(frame.f32, frame.element_pointer(binding, self.op(Ops.int_add, base, j)))
                  for j in range(features)]
            ys = emit_input_stage(self.m, fn, self.plan, xs, self.vector_element)
            zero = self.writer.constant(0.0)
            start = self.op(Ops.int_mul, self.local, self.stride)
            for column in range(align_up(width, self.shape.granularity)):
                y = fn.ops.select(frame.f32, inside, ys[column], zero) if column < width else zero
                fn.ops.store(self.shared(0, self.op(Ops.int_add, start, column)),
                             fn.ops.float_convert(self.f16, y), SHARED)

    def vector_element(self, param: str, element: Id) -> Id:
        """Element `element` (a u32 id) of the float16 vector entry `param` of the weight buffer, as float32."""
        return self.fn.ops.float_convert(self.frame.f32, self.fn.ops.load(self.f16, self.weight(param, element)))

    def inputs(self) -> None:
        """Buffer 0: the tile's input block with stage 0 applied (0 past the batch), then zeros to the padding."""
        if self.plan.input_stage:
            self.input_stage()
            return
        fn, frame = self.fn, self.frame
        features = self.plan.input.shape[0]
        binding = self.binding_of[self.plan.input.graph_name]
        block = self.op(Ops.int_mul, self.first, features)
        # the batch's last element stands in past it, so the read stays in the buffer; its value is then dropped
        last = self.op(Ops.int_sub, self.op(Ops.int_mul, self.count, features), 1)
        zero = self.writer.constant(0.0)
        with self.elements(features) as (element, sample, column):
            inside = fn.ops.uint_less(frame.bool, self.op(Ops.int_add, self.first, sample), self.count)
            read = self.fn.ext_inst(self.u32, "UMin", self.op(Ops.int_add, block, element), last)
            x = fn.ops.load(frame.f32, frame.element_pointer(binding, read))
            y = emit_stage(self.writer, self.plan, self.plan.stages[0], x)
            kept = fn.ops.select(frame.f32, inside, y, zero)
            fn.ops.store(self.shared(0, self.op(Ops.int_add, self.op(Ops.int_mul, sample, self.stride), column)),
                         fn.ops.float_convert(self.f16, kept), SHARED)
        padding = align_up(features, self.shape.granularity) - features
        if padding:
            with self.elements(padding) as (_, sample, column):
                at = self.op(Ops.int_add, self.op(Ops.int_mul, sample, self.stride),
                             self.op(Ops.int_add, column, features))
                fn.ops.store(self.shared(0, at), self.m.constant(self.f16, 0.0), SHARED)

    def layer(self, stage: Stage, source: int, target: int) -> None:
        """Buffer `target` = `stage` of the activations in buffer `source`, column tile by column tile over the
        subgroups, every row tile of a column on the same B tiles."""
        fn, shape, f32 = self.fn, self.shape, self.frame.f32
        width, columns = align_up(stage.width, shape.granularity), align_up(stage.columns, shape.granularity)
        a_type = self.matrix(self.f16, shape.m, shape.k, "MatrixAKHR")
        b_type = self.matrix(self.f16, shape.k, shape.n, "MatrixBKHR")
        accumulator = self.matrix(f32, shape.m, shape.n, "MatrixAccumulatorKHR")
        halves = self.matrix(self.f16, shape.m, shape.n, "MatrixAccumulatorKHR")
        stride = self.frame.uint(self.stride)
        with fn.for_range(self.subgroup, self.frame.uint(width // shape.n), self.subgroups) as c:
            column = self.op(Ops.int_mul, c, shape.n)
            if stage.bias is not None:
                bias = fn.ops.matrix_load(halves, self.weight(stage.bias, column), self.row_major,
                                          self.frame.uint(width))
                start = fn.ops.float_convert(accumulator, bias)
            else:
                start = self.m.constant_null(accumulator)
            weights = self.op(Ops.int_mul, c, shape.n * columns)
            b = [fn.ops.matrix_load(b_type,
                                    self.weight(stage.matrix, self.op(Ops.int_add, weights, k0)), self.column_major,
                                    self.frame.uint(columns)) for k0 in range(0, columns, shape.k)]
            rows = [r * shape.m * self.stride for r in range(self.tile // shape.m)]
            # K outermost, rows inside: the row tiles' chains interleave; each still adds its K steps in order
            accumulators = [start] * len(rows)
            for step, k0 in enumerate(range(0, columns, shape.k)):
                for r, row in enumerate(rows):
                    a = fn.ops.matrix_load(a_type, self.shared(source, row + k0), self.row_major,
                                           stride, SHARED)
                    accumulators[r] = fn.ops.matrix_mul_add(accumulator, a, b[step],
                                                            accumulators[r])
            for row, acc in zip(rows, accumulators):
                if stage.epilogue:
                    acc = self.epilogue(stage, acc, accumulator)
                fn.ops.matrix_store(self.shared(target, self.op(Ops.int_add, column, row)),
                                    fn.ops.float_convert(halves, acc), self.row_major, stride, SHARED)
        self.fn.barrier()

    def epilogue(self, stage: Stage, acc: Id, accumulator: Id) -> Id:
        """The stage on every component this invocation holds of `acc` (float32)."""
        fn, f32 = self.fn, self.frame.f32
        held = HeldMatrix(fn, accumulator, f32, acc)
        with components(fn, accumulator) as i:
            pointer = held.pointer(i)
            fn.ops.store(pointer, emit_stage(self.writer, self.plan, stage, fn.ops.load(f32, pointer)))
        return held.value()

    def outputs(self, source: int) -> None:
        """The tile's output block from buffer `source`, the elements of samples in the batch only."""
        fn, frame = self.fn, self.frame
        features = self.plan.output.shape[0]
        binding = self.binding_of[self.plan.output.graph_name]
        block = self.op(Ops.int_mul, self.first, features)
        with self.elements(features) as (element, sample, column):
            with fn.if_(fn.ops.uint_less(frame.bool, self.op(Ops.int_add, self.first, sample), self.count)):
                at = self.op(Ops.int_add, self.op(Ops.int_mul, sample, self.stride), column)
                value = fn.ops.load(self.f16, self.shared(source, at), SHARED)
                fn.ops.store(frame.element_pointer(binding, self.op(Ops.int_add, block, element)),
                             fn.ops.float_convert(frame.f32, value))

    def compile(self) -> bytes:
        self.inputs()
        self.fn.barrier()
        for index, stage in enumerate(self.plan.products, start=1):
            self.layer(stage, (index - 1) % 2, index % 2)
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
                shape: Shape = Shape(), packed: WeightImage | None = None,
                invocations: int = WORKGROUP_INVOCATIONS) -> Binary:
        """SPIR-V for `program` in tiles of `workgroup_size` samples (a work-group of `local_size(workgroup_size,
        invocations)`) on M x N x K = `shape` matrices; CompileError when the program is not a chain of layers
        (`plan_tiles`) the shape can take."""
        plan = plan_tiles(program, NAME)
        check_plan(plan, workgroup_size, shape)
        packed = packed if packed is not None else pack_tiles(plan, weights, shape.granularity, shape.m)
        emitter = CoopmatEmitter(plan, workgroup_size, shape, packed, invocations)
        spirv = emitter.compile()
        size = emitter.frame.workgroup_size
        text = kernel_text(emitter.plan, emitter.packed, emitter.shape, emitter.tile, size, emitter.stride)
        return Binary(NAME, spirv, "main", size, emitter.bindings, PUSH_CONSTANTS, packed, FEATURES, frozenset(),
                      text=text)
