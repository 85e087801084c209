"""The tiled training-step kernel: a work-group carries a tile of samples forward, through the loss and back through
every layer on VK_KHR_cooperative_matrix 16x16x16 float16 products with float32 accumulators.

It follows the coopmat inference kernel (`coopnn.backends.coopmat.target`): activations as float16 rows in workgroup
memory, a layer's 16-wide column tiles shared out over the subgroups (`coopnn.shaders.training.tiles.passes`), in
one buffer updated in place or in two (`coopnn.train.gpu.tiling.Tiling`). The cooperative-vector step kernel spends
most of its time storing the tape from per-invocation vectors; this one copies whole rows of workgroup memory onto
it, which is why it is the faster kernel on deep models (bench/results/nvidia-h100-80gb-hbm3-2026-11-27-tiled-step.md,
...-tiled-step-ablation.md).

- Forward: the parameter-free prefix is lowered by the cooperative-vector target, one invocation per sample of the
  tile (reading the row the sampler draws, `coopnn.shaders.targets.sampler`), into buffer 0, with the sample's
  targets. Every layer's input goes on the tape once the barrier after the layer that wrote it has passed
  (`copy_to_tape`: consecutive invocations on consecutive addresses). KHR leaves which element a component is to the
  implementation but gives matrices of one type the same mapping, so the kernel loads once an accumulator whose
  elements are their own index, and the epilogues read each component's sample and feature from it. Products start
  from the bias (`bias_tile`).
- A hidden layer's epilogue applies the activation in float32 and, unless its derivative follows from the output
  (`OUTPUT_DERIVATIVES`), stores the derivative on the tape where the layer's delta will go; in place, ReLU's
  derivative stays in registers as sign bits (`coopnn.shaders.training.tiles.signs`).
- The last layer's epilogue computes the loss terms and the scaled gradient (`coopnn.train.gpu.loss_kernels`); the
  first invocations sum each sample's terms into its loss.
- Backward, layer by layer: the delta tile times W gives the gradient at the layer before's output, times that
  layer's derivative, stored as its delta into workgroup memory and then onto the tape (feature-major deltas,
  `TapeLayout.deltas`, go on as tiles from the epilogues).

Weights are the session's float16 blocked copy (binding 0, `ParameterLayout.block_index`), so a B tile is one
contiguous read; widths are padded to whole 16s. Bindings and push constants are the step program's
(`CoopvecEmitter`); the session runs whole work-groups (padding samples masked).
"""

from __future__ import annotations

from coopnn.backends.coopvec.target import FEATURES as COOPVEC_FEATURES, LOWERINGS, CoopvecEmitter
from coopnn.shaders.training.tiles.addressing import SHARED
from coopnn.shaders.training.tiles.passes import LayerPasses
from coopnn.shaders.training.tiles.signs import SIGN_DERIVATIVES, SignBits, bits_per_row_tile
from coopnn.train.gpu.tiling import (MATRIX, SHARED_MEMORY, SUBGROUP_SIZE, Tiling, activation_stride,
                                     padded, tiling_for, unsupported_reason)
from coopnn.errors import CompileError
from coopnn.graph.ir import Op
from coopnn.shaders.kernel.activations import apply as apply_activation
from coopnn.shaders.kernel.derivatives import derivative
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.shaders.spirv.ops import Ops
from coopnn.shaders.targets.base import Binary
from coopnn.shaders.targets.held_matrix import HeldMatrix, components
from coopnn.shaders.targets.scalar_writer import ScalarWriter
from coopnn.shaders.training.indices import Indices
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.shaders.training.shader import HALVES_PER_WORD, word_type, word_view
from coopnn.train.gpu.loss_kernels import loss_terms
from coopnn.train.gpu.plan import TrainingPlan
from coopnn.shaders.training.tuning import DEFAULT, Tuning
from coopnn.train.gpu.step_program import LOSS_SCALE, TAPE, TARGET_PARAM
from coopnn.train.losses import Loss

FEATURES = COOPVEC_FEATURES | {"cooperativeMatrix", "vulkanMemoryModel"}
# Activations whose derivative at the pre-activation is their derivative rule evaluated at the output (relu: the
# output is positive where the input is), so the backward pass reads the layer's output from the tape and the forward
# pass stores no derivative.
OUTPUT_DERIVATIVES = frozenset({Op.RELU})
STORAGE_BARRIER = ("WorkgroupMemory", "UniformMemory")


def tiled_step_shader(program: KernelProgram, plan: TrainingPlan, loss: Loss, parameters: ParameterLayout,
                      tape: TapeLayout, shared_memory: int = SHARED_MEMORY, max_subgroup_size: int = SUBGROUP_SIZE,
                      min_subgroup_size: int = SUBGROUP_SIZE, tuning: Tuning = DEFAULT) -> Binary:
    """The step kernel for a device with `shared_memory` bytes of workgroup memory and subgroups of
    `min_subgroup_size` to `max_subgroup_size` invocations, its tiling as `tuning` sets it."""
    reason = unsupported_reason(plan, loss, shared_memory, max_subgroup_size, tuning)
    if reason is not None:
        raise CompileError(f"the tiled training step cannot train {plan.graph.name!r}: {reason}")
    uneven = [n for layer in parameters.layers for n in (layer.rows, layer.cols) if n % MATRIX]
    if uneven:
        raise ValueError(f"the tiled step takes layouts padded to whole {MATRIX}s (`padded`), not a width of "
                         f"{uneven[0]}")
    emitter = TiledStepEmitter(program, plan, loss, parameters, tape,
                               tiling_for(plan, shared_memory, max_subgroup_size, tuning), min_subgroup_size,
                               max_subgroup_size)
    spirv = emitter.compile()
    step = emitter.step
    return Binary("coopvec", spirv, "main", step.frame.workgroup_size, step.bindings, step.push_constants, None,
                  FEATURES, frozenset(), f"{plan.graph.name} tiled training step")


class TiledStepEmitter(LayerPasses):
    def __init__(self, program: KernelProgram, plan: TrainingPlan, loss: Loss, parameters: ParameterLayout,
                 tape: TapeLayout, tiling: Tiling, min_subgroup_size: int, max_subgroup_size: int = SUBGROUP_SIZE):
        self.program, self.plan, self.loss, self.tape, self.tiling = program, plan, loss, tape, tiling
        self.least_subgroups = tiling.invocations // max_subgroup_size  # the work-group has at least these
        self.layers = parameters.layers
        self.tile, self.row_tiles = tiling.samples, tiling.samples // MATRIX
        self.step = CoopvecEmitter(program, None, self.tile, bounds_check=False)
        frame = self.frame = self.step.frame
        self.invocations = tiling.invocations
        frame.workgroup_size = (self.tile, self.invocations // self.tile, 1)
        m, fn = self.m, self.fn = frame.module, frame.main
        self.ops, self.ix = Ops(fn), Indices(frame)
        self.u32, self.f32, self.f16, self.bool = frame.u32, frame.f32, self.step.f16, frame.bool
        self.writer = ScalarWriter(m, fn)
        self.stride = activation_stride(plan)
        self.word = word_type(frame)
        self.activations = tuple(self.activation_buffer(f"activations_{i}") for i in range(self.buffer_count()))
        self.out_width = padded(plan.out_features)
        self.terms = m.global_variable("Workgroup", m.type_array(self.f32, m.constant(self.u32,
                                                                                      self.tile * self.out_width)),
                                       name="loss_terms")
        self.indices = m.global_variable("Workgroup", m.type_array(self.f32, m.constant(self.u32, MATRIX * MATRIX)),
                                         name="element_indices")
        self.a_type = self.matrix(self.f16, "MatrixAKHR")
        self.b_type = self.matrix(self.f16, "MatrixBKHR")
        self.accumulator = self.matrix(self.f32, "MatrixAccumulatorKHR")
        self.halves = self.matrix(self.f16, "MatrixAccumulatorKHR")
        self.row_major = m.enum_constant("CooperativeMatrixLayout", "RowMajorKHR")
        self.column_major = m.enum_constant("CooperativeMatrixLayout", "ColumnMajorKHR")
        self.tape_binding = self.step.binding_of[TAPE]
        self.loss_binding = next(b.index for b in self.step.bindings if b.role == "loss")
        self.tape_words = word_view(frame, self.tape_binding, writable=True)
        bits = bits_per_row_tile(min_subgroup_size)
        self.signs = SignBits(fn, self.u32, self.bool, bits) if tiling.in_place and bits is not None else None

    # ----- helpers --------------------------------------------------------------------------------------------------

    def buffer_count(self) -> int:
        """Activation buffers in workgroup memory."""
        return 1 if self.tiling.in_place else 2

    def activation_buffer(self, name: str):
        """One workgroup-memory buffer of the tile's rows, `stride` halves each."""
        rows = self.m.type_array(self.word, self.m.constant(self.u32, self.tile * self.stride // HALVES_PER_WORD))
        return self.m.global_variable("Workgroup", rows, name=name)

    def activated(self, held: HeldMatrix, component, index: int):
        """(z, y) of layer `index` at an accumulator component: the pre-activation (the products started from the
        bias, `bias_tile`) and the layer's activation of it, in float32."""
        act = self.plan.layers[index].activation
        z = held.load(component)
        return z, (z if act is None else apply_activation(self.writer, act.op, z, act.attrs))

    def bias_tile(self, index: int, column):
        """An accumulator whose every row is layer `index`'s bias over the column tile at `column`: a load of stride
        0, which KHR allows for loads (every row read from the same 16 halves)."""
        pointer = self.weight_pointer(self.ix.add(column, self.layers[index].bias_offset))
        return self.ops.float_convert(self.accumulator,
                                      self.load(self.halves, pointer, self.row_major, self.frame.zero))

    def feature_mask(self, index: int, component, column):
        """Whether the component is one of layer `index`'s features, or None where the layer has no padding
        features."""
        rows = self.plan.layers[index].rows
        if rows % MATRIX == 0:
            return None
        return self.ix.less(self.feature(component, column), self.frame.uint(rows))

    def masked(self, valid, value, zero):
        """`value`, or `zero` where `valid` (a `feature_mask`) is false."""
        return value if valid is None else self.ops.select(self.f32, valid, value, zero)

    # ----- the kernel -----------------------------------------------------------------------------------------------

    def compile(self) -> bytes:
        fn, frame = self.fn, self.frame
        self.local = self.builtin("LocalInvocationIndex")
        self.subgroup, self.subgroups = self.builtin("SubgroupId"), self.builtin("NumSubgroups")
        group = self.ops.load(self.m.type_vector(self.u32, 3),
                              self.m.builtin_input("WorkgroupId", self.m.type_vector(self.u32, 3)))
        self.first = self.ix.mul(self.ops.extract(self.u32, group, 0), self.tile)
        self.capacity, self.batch = frame.push_value("capacity"), frame.push_value("batch")
        self.scale = frame.uniform_value(LOSS_SCALE)
        self.prefix()
        self.load_index_matrix()
        self.copy_to_tape(0, self.tape.input_start(0), self.layers[0].cols)
        last, buffers = len(self.layers) - 1, len(self.activations)
        for index in range(len(self.layers)):
            self.forward(index, index % buffers, (index + 1) % buffers)
            fn.barrier(memory=STORAGE_BARRIER if index == last and self.backward_reads_tape() else ("WorkgroupMemory",))
            if index < last:
                self.copy_to_tape((index + 1) % buffers, self.tape.input_start(index + 1), self.layers[index].rows)
            elif self.tape.deltas == "samples":
                self.copy_to_tape((index + 1) % buffers, self.tape.delta_start(index), self.layers[index].rows)
        self.losses()
        for index in reversed(range(1, len(self.layers))):  # layer index's delta is where forward(index) put it
            self.backward(index, (index + 1) % buffers, index % buffers)
            fn.barrier()
            if self.tape.deltas == "samples":
                self.copy_to_tape(index % buffers, self.tape.delta_start(index - 1), self.layers[index - 1].rows)
        return frame.finish()

    def load_index_matrix(self) -> None:
        """`index_matrix`: an accumulator whose components are their own element index, through workgroup memory."""
        fn, frame = self.fn, self.frame
        with fn.for_range(self.local, frame.uint(MATRIX * MATRIX), frame.uint(self.invocations)) as element:
            self.ops.store(self.shared_f32(self.indices, element), self.ops.uint_to_float(self.f32, element),
                    SHARED)
        fn.barrier()
        self.index_matrix = self.held(self.load(self.accumulator, self.shared_f32(self.indices, frame.zero),
                                                self.row_major, frame.uint(MATRIX), SHARED), "element_index")

    def prefix(self) -> None:
        """Buffer 0: the first layer's input, the parameter-free prefix of one sample per invocation (as many
        invocations as the tile has samples; global x is the sample), zero-padded to the layer's width; and the
        sample's targets, read at the same data row, into the loss terms' block, where the loss epilogue reads them.
        The epilogue so needs no data rows, which is faster than reading the targets there through rows kept in
        workgroup memory."""
        step, fn, program = self.step, self.fn, self.program
        # the first layer's input: the prefix ends at its store onto the tape, or at its product with no tape
        end, first = next((i, instr) for i, instr in enumerate(program.body)
                          if instr.op == "gemv" or (instr.op == "store" and instr.args[1] == TAPE))
        x = first.args[0] if first.op == "store" else first.args[1]
        with fn.if_(self.ix.less(self.local, self.frame.uint(self.tile))):
            for instr in program.body[:end]:
                step.held[instr.result] = LOWERINGS[instr.op](step, instr)
            targets = next(instr for instr in program.body if instr.op == "load" and instr.args[0] == TARGET_PARAM)
            first = self.ix.mul(self.local, self.out_width)
            for f, value in enumerate(step.forms.components(LOWERINGS["load"](step, targets), "f32")):
                self.ops.store(self.shared_f32(self.terms, self.ix.add(first, f)), value, SHARED)
            x = step.forms.components(step.held[x], "f16")
            zero = self.m.constant(self.f16, 0.0)
            row = self.ix.mul(self.local, self.stride)
            halves = [x[k] if k < len(x) else zero for k in range(self.layers[0].cols)]
            pair = self.m.type_vector(self.f16, 2)
            for k in range(0, len(halves), HALVES_PER_WORD):
                words = [self.ops.bitcast(self.u32, self.ops.construct(pair, *halves[j:j + 2]))
                         for j in range(k, k + HALVES_PER_WORD, 2)]
                self.ops.store(self.shared(0, self.ix.add(row, k)), self.ops.construct(self.word, *words), SHARED)

    def forward(self, index: int, source: int, target: int) -> None:
        """Layer `index`: buffer `target` = its output (the next layer's input, also onto the tape) or, for the last
        layer, its delta (onto the tape too) and the loss terms."""
        layer = self.layers[index]
        epilogue = self.loss_epilogue if index == len(self.layers) - 1 else self.hidden_epilogue

        def b_tile_of(column):  # B(k, n) = W[column + n][k0 + k]: the blocked tile read column-major, W^T
            return lambda k0: self.load(self.b_type, self.weight_pointer(self.ix.add(self.ix.add(
                self.ix.mul(column, layer.cols), layer.weight_offset), k0 * MATRIX)),
                self.column_major, self.frame.uint(MATRIX))

        self.layer_pass(layer.rows, layer.cols, source, b_tile_of, lambda column: self.bias_tile(index, column),
                        lambda acc, row, column: epilogue(index, acc, row, column, target))

    def backward_reads_tape(self) -> bool:
        """Whether the backward pass reads what the forward pass stored on the tape (a derivative, or ReLU's output
        where no sign bits are kept): always, unless the tiling is `lean_barrier`."""
        if not self.tiling.lean_barrier:
            return True
        return any(act is not None and not self.keeps_signs(act)
                   for act in (layer.activation for layer in self.plan.layers[:-1]))

    def keeps_signs(self, act) -> bool:
        """Whether the kernel keeps the sign bits of a layer with activation `act` (`SignBits`), in place of reading
        its derivative back from the tape."""
        return self.signs is not None and act is not None and act.op in SIGN_DERIVATIVES

    def hidden_epilogue(self, index: int, acc, row: int, column, target: int) -> None:
        """Activation and (where the backward pass cannot read it from the output or the sign bits) the derivative of
        one accumulator of a hidden layer; its output into buffer `target` and onto the tape."""
        fn, w, layer, planned = self.fn, self.writer, self.layers[index], self.plan.layers[index]
        act = planned.activation
        stores_slope = act is not None and act.op not in OUTPUT_DERIVATIVES
        keeps_signs = self.keeps_signs(act)
        held = self.held(acc, "z")
        slopes = self.held(None, "slope") if stores_slope else None
        zero = w.constant(0.0)
        with components(fn, self.accumulator) as i:
            valid = self.feature_mask(index, i, column)
            z, y = self.activated(held, i, index)
            output = self.masked(valid, y, zero)
            self.ops.store(held.pointer(i), output)
            if keeps_signs:  # of the float16 output, as the tape holds it
                self.signs.keep(index, row // MATRIX, i, self.ops.float_greater(self.bool, self.ops.float_convert(
                    self.f16, output), self.m.constant(self.f16, 0.0)))
            if stores_slope:
                slope = derivative(w, act.op, z, y, act.attrs)
                self.ops.store(slopes.pointer(i), self.masked(valid, slope, zero))
        output = self.ops.float_convert(self.halves, held.value())
        self.to_buffer(target, output, row, column)
        if stores_slope:
            self.keep_slope(index, self.ops.float_convert(self.halves, slopes.value()), row, column)

    def keep_slope(self, index: int, slope, row, column) -> None:
        """The float16 tile of layer `index`'s activation derivative where `slope_of` reads it: the tape region of
        the layer's delta."""
        self.to_tape(slope, self.tape.delta_start(index), self.layers[index].rows, self.tape.deltas, row, column)

    def loss_epilogue(self, index: int, acc, row: int, column, target: int) -> None:
        """The last layer's accumulator: the loss terms into the float32 block, the delta (the scaled loss gradient
        times the activation's derivative, 0 for padding features and samples past the batch) into buffer `target`
        and onto the tape."""
        fn, w, layer, planned = self.fn, self.writer, self.layers[index], self.plan.layers[index]
        act = planned.activation
        held = self.held(acc, "z")
        terms = self.held(None, "terms")
        zero = w.constant(0.0)
        with components(fn, self.accumulator) as i:
            feature, sample = self.feature(i, column), self.sample(i, row)
            inside = self.ix.both(self.ix.less(feature, self.frame.uint(planned.rows)),
                                  self.ix.less(sample, self.batch))
            z, y = self.activated(held, i, index)
            slot = self.ix.add(self.ix.mul(self.tile_sample(i, row), self.out_width), feature)
            t = self.ops.load(self.f32, self.shared_f32(self.terms, slot), SHARED)
            term, slope = loss_terms(w, self.loss, y, t)
            gradient = self.ops.float_mul(self.f32, slope, self.scale)
            if act is not None:
                gradient = self.ops.float_mul(self.f32, gradient, derivative(w, act.op, z, y, act.attrs))
            self.ops.store(terms.pointer(i), self.ops.select(self.f32, inside, term, zero))
            self.ops.store(held.pointer(i), self.ops.select(self.f32, inside, gradient, zero))
        delta = self.ops.float_convert(self.halves, held.value())
        self.to_buffer(target, delta, row, column)
        if self.tape.deltas == "features":
            self.to_tape(delta, self.tape.delta_start(index), layer.rows, self.tape.deltas, row, column)
        # the terms overwrite the targets the subgroup read, and KHR does not say which invocation stores an element
        fn.barrier("Subgroup")
        self.store(self.shared_f32(self.terms, self.ix.add(column, self.times(row, self.out_width))),
                   terms.value(), self.row_major, self.frame.uint(self.out_width), SHARED)

    def losses(self) -> None:
        """Each sample's loss: the sum of its row of loss terms, by the first invocations, one a sample."""
        fn = self.fn
        with fn.if_(self.ix.less(self.local, self.frame.uint(self.tile))):
            row = self.ix.mul(self.local, self.out_width)
            total = self.writer.constant(0.0)
            for j in range(self.out_width):
                total = self.ops.float_add(self.f32, total, self.ops.load(self.f32, self.shared_f32(
                    self.terms, self.ix.add(row, j)), SHARED))
            self.ops.store(self.frame.element_pointer(self.loss_binding, self.ix.add(self.first, self.local)),
                    total)

    def backward(self, index: int, source: int, target: int) -> None:
        """Buffer `target` = layer index - 1's delta: layer `index`'s delta (buffer `source`) times its W, times the
        derivative of layer index - 1's activation; onto the tape as well."""
        layer, below = self.layers[index], self.layers[index - 1]
        act = self.plan.layers[index - 1].activation

        def b_tile_of(column):  # B(k, n) = W[k0 + k][column + n]: the blocked tile read row-major
            return lambda k0: self.load(self.b_type, self.weight_pointer(self.ix.add(
                self.ix.mul(column, MATRIX), k0 * layer.cols + layer.weight_offset)), self.row_major,
                self.frame.uint(MATRIX))

        def epilogue(acc, row, column):
            delta = (self.ops.float_convert(self.halves, acc) if act is None
                     else self.times_derivative(index, acc, act, row, column))
            self.to_buffer(target, delta, row, column)
            if self.tape.deltas == "features":
                self.to_tape(delta, self.tape.delta_start(index - 1), below.rows, self.tape.deltas, row, column)

        self.layer_pass(layer.cols, layer.rows, source, b_tile_of, lambda column: self.m.constant_null(
            self.accumulator), epilogue)

    def times_derivative(self, index: int, acc, act, row: int, column):
        """`acc` (the gradient at layer index - 1's output) times its activation's derivative (`slope_of`). Float16."""
        fn = self.fn
        slope_of = self.slope_of(index, act, row, column)
        held = self.held(acc, "gradient")
        with components(fn, self.accumulator) as i:
            slope = slope_of(i)
            self.ops.store(held.pointer(i), self.ops.float_mul(self.f32, held.load(i), slope))
        return self.ops.float_convert(self.halves, held.value())

    def slope_of(self, index: int, act, row: int, column):
        """A function from an accumulator component to the derivative of layer index - 1's activation there: from the
        sign bits where the kernel keeps them, else read from the tile `slope_tile` gives: the layer's output (layer
        index's input) for `OUTPUT_DERIVATIVES`, else the derivative the forward pass stored."""
        if self.keeps_signs(act):
            one, zero = self.writer.constant(1.0), self.writer.constant(0.0)
            return lambda i: self.ops.select(self.f32, self.signs.positive(index - 1, row // MATRIX, i), one, zero)
        pointer, layout, stride = self.slope_tile(index, act, row, column)
        read = self.held(self.ops.float_convert(self.accumulator, self.load(self.halves, pointer, layout, stride,
                                                                            SHARED)), "read")
        if act.op not in OUTPUT_DERIVATIVES:
            return read.load

        def from_output(i):
            value = read.load(i)
            return derivative(self.writer, act.op, value, value, act.attrs)

        return from_output

    def slope_tile(self, index: int, act, row: int, column):
        """(pointer, matrix layout, stride) of the tile `slope_of` reads: on the tape, layer index's input region
        for `OUTPUT_DERIVATIVES`, else layer index - 1's delta region, where the forward pass stored the
        derivative."""
        below = self.layers[index - 1]
        if act.op in OUTPUT_DERIVATIVES:
            return self.tape_tile(self.tape.input_start(index), below.rows, "samples", row, column)
        return self.tape_tile(self.tape.delta_start(index - 1), below.rows, self.tape.deltas, row, column)
