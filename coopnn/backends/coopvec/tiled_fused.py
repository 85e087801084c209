"""The fused training step: the tiled step kernel (`coopnn.backends.coopvec.tiled_step`) forming the weight gradients
itself, from the tiles it holds in workgroup memory, with no tape.

A work-group of `INVOCATIONS` runs tile after tile of samples (tile t, t + NumWorkgroups, ...: `groups_for` sizes the
dispatch), and keeps every layer's input and output in workgroup memory while the tile is on chip: buffer l holds
layer l's input, buffers L and L + 1 (L layers) the deltas of the backward pass in turn, and, for activations whose
derivative is not a function of their output (`OUTPUT_DERIVATIVES`), one more buffer per such layer holds that
derivative. After each layer's delta is in its buffer, the work-group adds that tile's share of the layer's weight
gradient, delta^T (features x samples, a column-major load of the sample-major rows) times its input (samples x
features), to 16 x 16 float32 accumulators: tile u of a layer's gradient to subgroup u mod NumSubgroups, which keeps
it in registers over all of the work-group's tiles. Bias gradients are sums of the delta rows by single invocations
(a feature each, the tile's samples split between the invocations of one feature). After its last tile the work-group
writes its accumulators as one partial gradient, the work-group's number its chunk, which the optimizer adds
(`optimizer_adds_partials`); every invocation adds what it wrote and flags a non-finite sum in the training state's
status word, as `coopnn.shaders.training.coopmat_gradients` does.

A layer's products go to subgroups as units of one column tile by `per_group` row tiles (`row_groups`), so that narrow
layers keep every subgroup busy.

Why: the tape the tiled step kernel writes is read back by the gradient kernel; this kernel moves none of it, and a
step's memory does not grow with a tape. The accumulators bound which models it takes (`MAX_ACCUMULATORS`). It is
slower than the tape all the same (bench/results/nvidia-h200-2026-11-28-fused-gradients.md): keeping every layer's
input on chip leaves small tiles and one work-group an SM, stalled by every layer's barrier, so "auto" does not take
it.
"""

from __future__ import annotations

from dataclasses import dataclass

from coopnn.shaders.training.tiles.addressing import SHARED
from coopnn.shaders.training.tiles.passes import row_groups
from coopnn.backends.coopvec.tiled_step import FEATURES as STEP_FEATURES, OUTPUT_DERIVATIVES, TiledStepEmitter
from coopnn.train.gpu.tiling import (MATRIX, SHARED_MEMORY, SUBGROUP_SIZE, Tiling, activation_stride,
                                     padded, untrainable_reason)
from coopnn.errors import CompileError
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.shaders.targets.base import Binary, Binding
from coopnn.shaders.targets.held_matrix import components
from coopnn.shaders.training.gradients import FEATURES as STATUS_FEATURES, flag_nonfinite_at
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.shaders.training.shader import HALVES_PER_WORD, buffer_view, storage_buffer
from coopnn.train.gpu.plan import TrainingPlan
from coopnn.train.losses import Loss

FEATURES = STEP_FEATURES | STATUS_FEATURES
# More invocations (fewer accumulators a subgroup, fewer registers each) made the step kernel slower
# (bench/results/nvidia-h200-2026-11-28-fused-gradients.md)
INVOCATIONS = 256
# Samples a tile: the largest of these whose buffers fit the device's workgroup memory
TILE_SAMPLES = (64, 32)
# 16 x 16 float32 accumulators a subgroup keeps for the weight gradients (8 registers each on subgroups of 32): more
# spill registers, which made the kernel several times slower (bench/results/nvidia-h200-2026-11-28-fused-gradients.md)
MAX_ACCUMULATORS = 12
# Work-groups a step runs at most, each writing one partial gradient: two an SM on the H200, whose registers leave one
# resident at a time; more were slower (bench/results/nvidia-h200-2026-11-28-fused-gradients.md)
MAX_GROUPS = 264
PARTIALS = "partials"


@dataclass(frozen=True)
class FusedTiling:
    """`samples` a tile, `invocations` a work-group, and the hidden layers whose activation's derivative has a buffer
    of its own (`slopes`)."""

    samples: int
    invocations: int
    slopes: tuple[int, ...]


def slope_layers(plan: TrainingPlan) -> tuple[int, ...]:
    """The hidden layers whose activation's derivative the backward pass cannot compute from the output."""
    return tuple(i for i, layer in enumerate(plan.layers[:-1])
                 if layer.activation is not None and layer.activation.op not in OUTPUT_DERIVATIVES)


def buffer_count(plan: TrainingPlan) -> int:
    """Workgroup-memory buffers of a tile's rows: each layer's input, two for deltas, the derivatives'."""
    return len(plan.layers) + 2 + len(slope_layers(plan))


def workgroup_memory(plan: TrainingPlan, samples: int) -> int:
    """Bytes of workgroup memory the kernel takes with tiles of `samples`: the buffers, the index matrix, the loss
    terms and the bias gradients' partial sums."""
    return (buffer_count(plan) * samples * activation_stride(plan) * 2 + MATRIX * MATRIX * 4
            + samples * padded(plan.out_features) * 4 + INVOCATIONS * 4)


def accumulators(plan: TrainingPlan, subgroups: int) -> int:
    """The weight-gradient accumulators a subgroup keeps with `subgroups` subgroups a work-group."""
    return sum(-(-(padded(layer.rows) // MATRIX) * (padded(layer.cols) // MATRIX) // subgroups)
               for layer in plan.layers)


def fused_tiling(plan: TrainingPlan, shared_memory: int = SHARED_MEMORY) -> FusedTiling | None:
    """The largest tile whose buffers fit `shared_memory` bytes, or None."""
    for samples in TILE_SAMPLES:
        if workgroup_memory(plan, samples) <= shared_memory:
            return FusedTiling(samples, INVOCATIONS, slope_layers(plan))
    return None


def unsupported_reason(plan: TrainingPlan, loss: Loss, shared_memory: int = SHARED_MEMORY,
                       max_subgroup_size: int = SUBGROUP_SIZE) -> str | None:
    """Why the fused kernel cannot train this model on a device with `shared_memory` bytes of workgroup memory and
    subgroups of up to `max_subgroup_size`, or None."""
    reason = untrainable_reason(plan, loss)
    if reason is not None:
        return reason
    held = accumulators(plan, INVOCATIONS // max_subgroup_size)
    if held > MAX_ACCUMULATORS:
        return (f"its weight gradients take {held} 16 x 16 accumulators a subgroup, more than the "
                f"{MAX_ACCUMULATORS} it keeps in registers")
    if fused_tiling(plan, shared_memory) is None:
        smallest = TILE_SAMPLES[-1]
        return (f"a tile of {smallest} samples of its layers needs {workgroup_memory(plan, smallest)} bytes of "
                f"workgroup memory, the device offers {shared_memory}")
    return None


def groups_for(count: int, samples: int) -> int:
    """Work-groups a step of `count` samples (whole tiles of `samples`) runs: each writes a partial gradient."""
    return max(1, min(count // samples, MAX_GROUPS))


def fused_step_shader(program: KernelProgram, plan: TrainingPlan, loss: Loss, parameters: ParameterLayout,
                      shared_memory: int = SHARED_MEMORY, max_subgroup_size: int = SUBGROUP_SIZE,
                      min_subgroup_size: int = SUBGROUP_SIZE) -> Binary:
    """The fused step kernel (`program` with a tape of no layers) for a device with `shared_memory` bytes of
    workgroup memory and subgroups of `min_subgroup_size` to `max_subgroup_size` invocations."""
    reason = unsupported_reason(plan, loss, shared_memory, max_subgroup_size)
    if reason is not None:
        raise CompileError(f"the fused training step cannot train {plan.graph.name!r}: {reason}")
    uneven = [n for layer in parameters.layers for n in (layer.rows, layer.cols) if n % MATRIX]
    if uneven:
        raise ValueError(f"the fused step takes layouts padded to whole {MATRIX}s, not a width of {uneven[0]}")
    emitter = FusedStepEmitter(program, plan, loss, parameters, fused_tiling(plan, shared_memory),
                               min_subgroup_size, max_subgroup_size)
    spirv = emitter.compile()
    step = emitter.step
    bindings = step.bindings + (Binding(emitter.partials_binding, PARTIALS, PARTIALS, 0),)
    return Binary("coopvec", spirv, "main", step.frame.workgroup_size, bindings, step.push_constants, None,
                  FEATURES, frozenset(), f"{plan.graph.name} fused training step")


class FusedStepEmitter(TiledStepEmitter):
    def __init__(self, program: KernelProgram, plan: TrainingPlan, loss: Loss, parameters: ParameterLayout,
                 fused: FusedTiling, min_subgroup_size: int, max_subgroup_size: int):
        super().__init__(program, plan, loss, parameters, TapeLayout((), "samples"),
                         Tiling(fused.samples, False, fused.invocations), min_subgroup_size, max_subgroup_size)
        self.parameter_count = parameters.size
        count = len(self.layers)
        self.deltas = (count, count + 1)
        self.slope_buffers = {layer: count + 2 + i for i, layer in enumerate(fused.slopes)}
        self.partials_binding = len(self.step.bindings)
        storage_buffer(self.frame, self.partials_binding, self.f32, writable=True, name=PARTIALS)
        self.status = buffer_view(self.frame, self.step.frame.state_binding, self.u32, writable=True, name="status")
        self.bias_sums = self.m.global_variable("Workgroup", self.m.type_array(
            self.f32, self.m.constant(self.u32, fused.invocations)), name="bias_sums")

    def buffer_count(self) -> int:
        return buffer_count(self.plan)

    # ----- the kernel -----------------------------------------------------------------------------------------------

    def compile(self) -> bytes:
        fn, frame = self.fn, self.frame
        self.local = self.builtin("LocalInvocationIndex")
        self.subgroup, self.subgroups = self.builtin("SubgroupId"), self.builtin("NumSubgroups")
        vector = self.m.type_vector(self.u32, 3)
        group = self.ops.extract(self.u32, self.ops.load(vector, self.m.builtin_input(
            "WorkgroupId", vector)), 0)
        groups = self.ops.extract(self.u32, self.ops.load(vector, self.m.builtin_input(
            "NumWorkgroups", vector)), 0)
        self.capacity, self.batch = frame.push_value("capacity"), frame.push_value("batch")
        tiles = self.ix.div(frame.push_value("count"), self.tile)
        self.scale = frame.uniform_value("loss_scale")
        self.load_index_matrix()
        self.weight_sums = [[fn.variable(self.accumulator, name=f"weight_gradient_{index}_{slot}")
                             for slot in range(self.slots(index))] for index in range(len(self.layers))]
        self.bias_parts = [[fn.variable(self.f32, name=f"bias_gradient_{index}_{slot}")
                            for slot in range(self.bias_slots(index))] for index in range(len(self.layers))]
        for variable in (v for layer in self.weight_sums for v in layer):
            self.ops.store(variable, self.m.constant_null(self.accumulator))
        for variable in (v for layer in self.bias_parts for v in layer):
            self.ops.store(variable, self.writer.constant(0.0))
        with fn.for_range(group, tiles, groups) as tile:
            self.first = self.ix.mul(tile, self.tile)
            frame.sample = self.ix.add(self.first, self.local)
            frame.data_row = frame.row_of(frame.sample)
            self.one_tile()
            fn.barrier()  # the next tile's prefix and forward pass overwrite what this one's gradients read
        self.write_partials(group)
        return frame.finish()

    def one_tile(self) -> None:
        fn = self.fn
        self.prefix()
        fn.barrier()
        for index in range(len(self.layers)):
            self.forward(index, index, index + 1)
            fn.barrier()
        self.losses()
        delta = self.deltas[0]
        for index in reversed(range(len(self.layers))):
            self.add_weight_gradients(index, delta)
            self.add_bias_gradients(index, delta)
            if index:
                below = self.deltas[1] if delta == self.deltas[0] else self.deltas[0]
                self.backward(index, delta, below)
                fn.barrier()
                delta = below

    # ----- the passes' hooks ----------------------------------------------------------------------------------------

    def layer_pass(self, width: int, depth: int, source: int, b_tile_of, initial_of, epilogue) -> None:
        """Units of one column tile by `per_group` row tiles, unit u to subgroup u mod NumSubgroups; the layer reads
        and writes different buffers, so epilogues follow their products with no barrier."""
        columns = width // MATRIX
        groups = row_groups(self.row_tiles, columns, self.least_subgroups)
        per_group = self.row_tiles // groups
        with self.fn.for_range(self.subgroup, self.frame.uint(columns * groups), self.subgroups) as unit:
            column = self.ix.mul(self.ix.mod(unit, columns), MATRIX)
            first = self.ix.mul(self.ix.div(unit, columns), per_group * MATRIX)
            rows = [self.ix.add(first, r * MATRIX) for r in range(per_group)]
            for row, acc in zip(rows, self.products(source, depth, b_tile_of(column), initial_of(column), rows)):
                epilogue(acc, row, column)

    def keep_slope(self, index: int, slope, row, column) -> None:
        self.to_buffer(self.slope_buffers[index], slope, row, column)

    def slope_tile(self, index: int, act, row, column):
        """In workgroup memory: layer index - 1's output (layer index's input, buffer `index`) for
        `OUTPUT_DERIVATIVES`, else its derivative's buffer."""
        buffer = index if act.op in OUTPUT_DERIVATIVES else self.slope_buffers[index - 1]
        return self.activation_tile(buffer, row, column), self.row_major, self.shared_stride()

    # ----- weight gradients -----------------------------------------------------------------------------------------

    def slots(self, index: int) -> int:
        """Accumulators a subgroup keeps for layer `index`'s weight gradient."""
        layer = self.layers[index]
        return -(-(layer.rows // MATRIX) * (layer.cols // MATRIX) // self.least_subgroups)

    def bias_slots(self, index: int) -> int:
        """Features of layer `index`'s bias an invocation sums."""
        return -(-self.layers[index].rows // self.invocations)

    def tile_of(self, index: int, slot: int):
        """(whether the subgroup has a tile in accumulator `slot` of layer `index`, its first row, its first
        column)."""
        columns = self.layers[index].cols // MATRIX
        tiles = self.layers[index].rows // MATRIX * columns
        unit = self.ix.add(self.subgroup, self.ix.mul(self.subgroups, slot))
        inside = self.ix.less(unit, self.frame.uint(tiles))
        return (inside, self.ix.mul(self.ix.div(unit, columns), MATRIX),
                self.ix.mul(self.ix.mod(unit, columns), MATRIX))

    def add_weight_gradients(self, index: int, delta: int) -> None:
        """The tile's delta^T (buffer `delta`) times layer `index`'s input (buffer `index`) onto the subgroup's
        accumulators."""
        fn = self.fn
        for slot, variable in enumerate(self.weight_sums[index]):
            inside, row, column = self.tile_of(index, slot)
            with fn.if_(inside):
                acc = self.ops.load(self.accumulator, variable)
                for k0 in range(0, self.tile, MATRIX):
                    a = self.load(self.a_type, self.activation_tile(delta, k0, row), self.column_major,
                                  self.shared_stride(), SHARED)
                    b = self.load(self.b_type, self.activation_tile(index, k0, column), self.row_major,
                                  self.shared_stride(), SHARED)
                    acc = self.ops.matrix_mul_add(self.accumulator, a, b, acc)
                self.ops.store(variable, acc)

    def bias_feature(self, index: int, slot: int):
        """(feature, first sample, samples apart, whether the invocation has one) of the invocation's share of layer
        `index`'s bias gradient in `slot`: a layer of R <= invocations features splits the tile's samples between
        invocations // R invocations a feature."""
        rows = self.layers[index].rows
        if rows <= self.invocations:
            phases = self.invocations // rows
            return (self.ix.mod(self.local, rows), self.ix.div(self.local, rows), phases,
                    self.ix.less(self.local, self.frame.uint(phases * rows)))
        feature = self.ix.add(self.local, slot * self.invocations)
        return feature, self.frame.zero, 1, self.ix.less(feature, self.frame.uint(rows))

    def add_bias_gradients(self, index: int, delta: int) -> None:
        """The invocation's share of the tile's delta rows (buffer `delta`) onto its bias sums of layer `index`."""
        fn = self.fn
        half_pair = self.m.type_vector(self.f16, 2)
        for slot, variable in enumerate(self.bias_parts[index]):
            feature, start, apart, inside = self.bias_feature(index, slot)
            with fn.if_(inside):
                with fn.for_range(start, self.frame.uint(self.tile), self.frame.uint(apart)) as sample:
                    half = self.ix.add(self.ix.mul(sample, self.stride), feature)
                    pointer = self.ops.access_chain(self.m.type_pointer("Workgroup", self.u32),
                                                    self.activations[delta], self.ix.div(half, HALVES_PER_WORD),
                                                    self.ix.bit_and(self.ix.shift_right(half, 1), 3))
                    pair = self.ops.bitcast(half_pair, self.ops.load(self.u32, pointer, SHARED))
                    value = self.ops.float_convert(self.f32, self.ops.extract_dynamic(self.f16, pair,
                                                                                      self.ix.bit_and(half, 1)))
                    self.ops.store(variable, self.ops.float_add(self.f32, self.ops.load(self.f32, variable),
                                                                value))

    # ----- the partial gradient -------------------------------------------------------------------------------------

    def write_partials(self, group) -> None:
        """The work-group's accumulators as chunk `group` of the partial gradients; a non-finite sum of what an
        invocation wrote sets the status word."""
        fn, size = self.fn, self.parameter_count
        base = self.ix.mul(group, size)
        total = fn.variable(self.f32, name="written")
        self.ops.store(total, self.writer.constant(0.0))

        def add(value):
            self.ops.store(total, self.ops.float_add(self.f32, self.ops.load(self.f32, total), value))

        for index, layer in enumerate(self.layers):
            for slot, variable in enumerate(self.weight_sums[index]):
                inside, row, column = self.tile_of(index, slot)
                with fn.if_(inside):
                    acc = self.ops.load(self.accumulator, variable)
                    first = self.ix.add(base, self.ix.add(layer.weight_offset, self.ix.add(
                        self.ix.mul(row, layer.cols), column)))
                    self.store(self.frame.element_pointer(self.partials_binding, first), acc, self.row_major,
                               self.frame.uint(layer.cols))
                    held = self.held(acc, "written_tile")
                    with components(fn, self.accumulator) as i:
                        add(held.load(i))
            for slot, variable in enumerate(self.bias_parts[index]):
                add(self.write_bias(index, slot, variable, base))
        flag_nonfinite_at(self.frame, self.ops.load(self.f32, total), self.ops.access_chain(
            self.m.type_pointer("StorageBuffer", self.u32), self.status, self.frame.zero, self.frame.zero))

    def write_bias(self, index: int, slot: int, variable, base):
        """The invocations' shares of bias slot `slot` of layer `index` summed through workgroup memory and written by
        one invocation a feature; what this invocation wrote (0 where it wrote nothing)."""
        fn, layer = self.fn, self.layers[index]
        apart = self.bias_feature(index, slot)[2]
        self.ops.store(self.shared_f32(self.bias_sums, self.local), self.ops.load(self.f32, variable), SHARED)
        fn.barrier()
        features = min(layer.rows - slot * self.invocations, self.invocations) if apart == 1 else layer.rows
        written = fn.variable(self.f32, name="bias_written")
        self.ops.store(written, self.writer.constant(0.0))
        with fn.if_(self.ix.less(self.local, self.frame.uint(features))):
            total = self.writer.constant(0.0)
            for phase in range(apart):
                total = self.ops.float_add(self.f32, total, self.ops.load(self.f32, self.shared_f32(
                    self.bias_sums, self.ix.add(self.local, phase * layer.rows)), SHARED))
            target = self.ix.add(base, self.ix.add(layer.bias_offset, slot * self.invocations))
            self.ops.store(self.frame.element_pointer(self.partials_binding, self.ix.add(target, self.local)),
                    total)
            self.ops.store(written, total)
        fn.barrier()
        return self.ops.load(self.f32, written)
