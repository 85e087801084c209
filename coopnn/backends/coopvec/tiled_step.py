"""The tiled training-step kernel: forward, loss and backward of 32 samples per subgroup on cooperative matrices.

A subgroup of 32 invocations carries its 32 samples (two 16-row tiles) through every layer as VK_KHR_cooperative_matrix
16x16x16 float16 x float16 -> float32 products, keeping them in its own part of workgroup memory (so it synchronizes
with subgroup barriers only):

- H, the current layer's input (samples x features, float16), overwritten by the layer's output tile row by tile row
  once all of that row's products are done. Each layer first copies its input to the tape.
- D, per layer the activation's derivative at the pre-activation (float16), which the backward pass overwrites with
  the layer's delta; each delta is copied to the tape (in the layout of `TapeLayout.deltas`), where the
  weight-gradient kernels read it.
- a 16x16 float32 tile through which every accumulator goes (KHR has no accumulator -> operand conversion, and its
  element order is the implementation's): each invocation then takes 8 of its elements, whose sample and feature it
  knows, to add the bias, apply the activation, its derivative and the loss (`ScalarWriter`: the kernel rules of
  `coopnn.shaders.kernel` and `coopnn.train.gpu.loss_kernels`, the one definition of each).

Weights are read from the float16 row-major working copy (binding 0; the forward product loads W as a column-major
B to get W^T). Widths are the session's (whole 8s); tiles of 16 read up to 8 rows and columns past a matrix, which
meet zero inputs or fall in masked features, so the buffer keeps `WEIGHT_SLACK` zeroed elements after its end. The
parameter-free prefix and the loss scale are lowered by the cooperative-vector target, one invocation per sample.
Bindings and push constants are the step program's (`CoopvecEmitter`).
"""

from __future__ import annotations

from coopnn.shaders.targets.scalar_writer import ScalarWriter
from coopnn.backends.coopvec.target import FEATURES as COOPVEC_FEATURES, LOWERINGS, CoopvecEmitter
from coopnn.errors import CompileError
from coopnn.shaders.kernel.activations import apply as apply_activation
from coopnn.shaders.kernel.derivatives import DERIVATIVES, derivative
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.shaders.targets.base import Binary
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.train.gpu.loss_kernels import LOSS_KERNELS, loss_terms
from coopnn.train.gpu.plan import TrainingPlan
from coopnn.train.gpu.step_program import TAPE
from coopnn.train.losses import Loss

TILE = 16
SUBGROUP = 32  # samples per subgroup, one per invocation: two tiles of rows
MAX_SUBGROUPS = 4
ROW_PAD = 8  # halves added to each workgroup-memory row: 16-byte aligned rows that fall on different banks
FEATURES = COOPVEC_FEATURES | {"cooperativeMatrix"}


def _tiles(n: int) -> int:
    return -(-n // TILE)


def weight_slack(parameters: ParameterLayout) -> int:
    """Zeroed float16 elements the working copy needs after its end: 8 rows (and 8 more) past the last matrix."""
    return 8 * max(layer.cols for layer in parameters.layers) + 2 * TILE


def _strides(parameters: ParameterLayout) -> tuple[int, int, list[int]]:
    """H's and D's row strides (halves) and where each layer's D columns start."""
    widths = [TILE * _tiles(n) for layer in parameters.layers for n in (layer.rows, layer.cols)]
    starts, total = [], 0
    for layer in parameters.layers:
        starts.append(total)
        total += TILE * _tiles(layer.rows)
    return max(widths) + ROW_PAD, total + ROW_PAD, starts


def subgroups_for(parameters: ParameterLayout, shared_memory: int) -> int:
    """Subgroups per workgroup that fit in `shared_memory` bytes (0: not even one)."""
    h, d, _ = _strides(parameters)
    per_subgroup = SUBGROUP * (h + d) * 2 + TILE * TILE * 4
    return min(MAX_SUBGROUPS, shared_memory // per_subgroup)


def unsupported_reason(plan: TrainingPlan, loss: Loss, parameters: ParameterLayout, shared_memory: int) -> str | None:
    """Why the tiled kernel cannot train this model, or None."""
    if loss.name not in LOSS_KERNELS:
        return f"it has no kernel for the loss {loss.name!r}"
    for layer in plan.layers:
        if layer.activation is not None and layer.activation.op not in DERIVATIVES:
            return f"the activation {layer.activation.op.value} of {layer.node} has no derivative"
    if subgroups_for(parameters, shared_memory) == 0:
        h, d, _ = _strides(parameters)
        return (f"32 samples of its layers need {SUBGROUP * (h + d) * 2 + TILE * TILE * 4} bytes of workgroup memory, "
                f"the device offers {shared_memory}")
    return None


def tiled_step_shader(program: KernelProgram, plan: TrainingPlan, loss: Loss, parameters: ParameterLayout,
                      tape: TapeLayout, shared_memory: int = 49152) -> Binary:
    reason = unsupported_reason(plan, loss, parameters, shared_memory)
    if reason is not None:
        raise CompileError(f"the tiled training step cannot train {plan.graph.name!r}: {reason}")
    subgroups = subgroups_for(parameters, shared_memory)
    emitter = CoopvecEmitter(program, None, SUBGROUP * subgroups)
    frame, m, fn = emitter.frame, emitter.m, emitter.fn
    u32, f32, f16, boolean = frame.u32, frame.f32, emitter.f16, frame.bool
    h_stride, d_stride, d_starts = _strides(parameters)
    layers, last = parameters.layers, len(parameters.layers) - 1

    # the prefix (every instruction before the first tape store) and the loss scale, one invocation per sample
    first_store = next(i for i, instr in enumerate(program.body) if instr.op == "store" and instr.args[1] == TAPE)
    for instr in program.body[:first_store] + tuple(i for i in program.body if i.op == "uniform"):
        emitter.held[instr.result] = LOWERINGS[instr.op](emitter, instr)
    x = emitter.forms.components(emitter.held[program.body[first_store].args[0]], "f16")
    scale = emitter.forms.components(next(emitter.held[i.result] for i in program.body if i.op == "uniform"), "f32")[0]
    capacity, batch = frame.push_value("capacity"), frame.push_value("batch")
    tape_binding = emitter.binding_of[TAPE]
    target_binding = next(b.index for b in emitter.bindings if b.role == "input" and b.features == plan.out_features
                          and b.name == program.param("t").graph_name)
    loss_binding = next(b.index for b in emitter.bindings if b.role == "loss")

    def op(name, *operands, type_=u32):
        return fn.emit(name, type_, *operands)

    def uint(value: int):
        return frame.uint(value)

    local = fn.emit("OpLoad", u32, m.builtin_input("LocalInvocationIndex", u32))
    lane, subgroup = op("OpUMod", local, uint(SUBGROUP)), op("OpUDiv", local, uint(SUBGROUP))
    base = op("OpISub", frame.sample, lane)  # the subgroup's first sample

    def shared(scalar, per_subgroup: int, name: str):
        array = m.global_variable("Workgroup", m.type_array(scalar, m.constant(u32, per_subgroup * subgroups)),
                                  name=name)
        return array, op("OpIMul", subgroup, uint(per_subgroup))

    h_mem, h_base = shared(f16, SUBGROUP * h_stride, "h")
    d_mem, d_base = shared(f16, SUBGROUP * d_stride, "d")
    s_mem, s_base = shared(f32, TILE * TILE, "scratch")

    def at(memory, first, index, scalar):
        return fn.emit("OpAccessChain", m.type_pointer("Workgroup", scalar), memory, op("OpIAdd", first, index))

    def h_at(row, column):
        return at(h_mem, h_base, op("OpIAdd", op("OpIMul", row, uint(h_stride)), column), f16)

    def d_at(row, column):
        return at(d_mem, d_base, op("OpIAdd", op("OpIMul", row, uint(d_stride)), column), f16)

    def matrix(component, use):
        return m.type_cooperative_matrix_khr(component, "Subgroup", TILE, TILE, use)

    a_type, b_type, c_type = matrix(f16, "MatrixAKHR"), matrix(f16, "MatrixBKHR"), matrix(f32, "MatrixAccumulatorKHR")
    row_major = m.enum_constant("CooperativeMatrixLayout", "RowMajorKHR")
    column_major = m.enum_constant("CooperativeMatrixLayout", "ColumnMajorKHR")
    zero_c = m.constant_composite(c_type, [m.constant(f32, 0.0)])
    zero16, zero32 = m.constant(f16, 0.0), m.constant(f32, 0.0)

    def load(type_, pointer, layout, stride: int):
        return fn.emit("OpCooperativeMatrixLoadKHR", type_, pointer, layout, uint(stride))

    def weight(index: int):
        return frame.element_pointer(0, uint(index), f16)

    def weight_at(offset: int, feature):
        return frame.element_pointer(0, op("OpIAdd", uint(offset), feature), f16)

    def products(a_tiles, a_stride: int, b_tile, count: int):
        """count accumulators: sum over k of A(k) x B(k, n) for n < count."""
        accumulators = [zero_c] * count
        for k, a_pointer in enumerate(a_tiles):
            a = load(a_type, a_pointer, row_major, a_stride)
            for n in range(count):
                accumulators[n] = fn.emit("OpCooperativeMatrixMulAddKHR", c_type, a, b_tile(k, n), accumulators[n])
        return accumulators

    lane_row, lane_column = op("OpShiftRightLogical", lane, uint(4)), op("OpBitwiseAnd", lane, uint(TILE - 1))

    def elementwise(accumulator, body):
        """The tile through scratch; body(row in the tile, value) for the 8 elements of each invocation, all in
        column `lane_column` (so what depends on the feature only is computed once, outside). Unrolled: the
        elements' loads and math overlap."""
        fn.emit("OpCooperativeMatrixStoreKHR", at(s_mem, s_base, frame.zero, f32), accumulator, row_major, uint(TILE))
        fn.barrier("Subgroup")
        for t in range(TILE * TILE // SUBGROUP):
            element = op("OpIAdd", lane, uint(t * SUBGROUP))
            body(op("OpIAdd", lane_row, uint(2 * t)), fn.emit("OpLoad", f32, at(s_mem, s_base, element, f32)))
        fn.barrier("Subgroup")

    copy_type = matrix(f16, "MatrixAccumulatorKHR")

    def to_tape(memory, first, stride: int, column0: int, width: int, tape_at, layout, tape_stride):
        """Columns column0 .. column0 + width of the subgroup's 32 rows of `memory` onto the tape: whole tiles as
        cooperative matrices (tape_at(row, column) is the tape element of that tile corner), the 8 columns past the
        last whole tile one element per invocation (a tile would overwrite the next row or region)."""
        for r in range(SUBGROUP // TILE):
            for k in range(width // TILE):
                tile = load(copy_type, at(memory, first, uint(r * TILE * stride + column0 + k * TILE), f16), row_major,
                            stride)
                fn.emit("OpCooperativeMatrixStoreKHR", frame.element_pointer(tape_binding, tape_at(
                    uint(r * TILE), uint(k * TILE)), f16), tile, layout, tape_stride)
        for column in range(width // TILE * TILE, width):
            value = fn.emit("OpLoad", f16, at(memory, first, op("OpIAdd", op("OpIMul", lane, uint(stride)),
                                                                 uint(column0 + column)), f16))
            fn.emit("OpStore", frame.element_pointer(tape_binding, tape_at(lane, uint(column)), f16), value)

    w = ScalarWriter(m, fn)

    def f16_or_zero(valid, value):
        return fn.emit("OpSelect", f16, valid, fn.emit("OpFConvert", f16, value), zero16)

    # the prefix's output is the first layer's input, zero-padded to whole tiles
    for k in range(TILE * _tiles(layers[0].cols)):
        fn.emit("OpStore", h_at(lane, uint(k)), x[k] if k < len(x) else zero16)
    fn.barrier("Subgroup")
    loss_sums = [fn.variable(f32, initializer=zero32) for _ in range(SUBGROUP // TILE)]

    for index, layer in enumerate(layers):
        planned = plan.layers[index]
        act = planned.activation
        # the layer's input onto the tape, sample-major: element (b, k) at region + b cols + k
        region = op("OpIAdd", op("OpIMul", capacity, uint(tape.input_start(index))), op("OpIMul", base, uint(layer.cols)))
        to_tape(h_mem, h_base, h_stride, 0, layer.cols,
                lambda row, column, region=region, cols=layer.cols: op(
                    "OpIAdd", region, op("OpIAdd", op("OpIMul", row, uint(cols)), column)), row_major, uint(layer.cols))
        for r in range(SUBGROUP // TILE):
            a_tiles = [at(h_mem, h_base, uint(r * TILE * h_stride + k * TILE), f16) for k in range(_tiles(layer.cols))]
            accumulators = products(
                a_tiles, h_stride,
                lambda k, n: load(b_type, weight(layer.weight_offset + n * TILE * layer.cols + k * TILE),
                                  column_major, layer.cols), _tiles(layer.rows))
            for n, accumulator in enumerate(accumulators):
                feature = op("OpIAdd", lane_column, uint(n * TILE))
                valid = fn.emit("OpULessThan", boolean, feature, uint(planned.rows))
                bias = fn.emit("OpFConvert", f32, fn.emit("OpLoad", f16, weight_at(layer.bias_offset, feature)))
                target_column = fn.emit("OpSelect", u32, valid, feature, frame.zero)

                def forward(row, value, r=r, feature=feature, valid=valid, bias=bias, target_column=target_column):
                    z = fn.emit("OpFAdd", f32, value, bias)
                    y = z if act is None else apply_activation(w, act.op, z, act.attrs)
                    sample_row = op("OpIAdd", row, uint(r * TILE))
                    if index < last:
                        fn.emit("OpStore", h_at(sample_row, feature), f16_or_zero(valid, y))
                        slope = derivative(w, act.op, z, y, act.attrs) if act is not None else m.constant(f32, 1.0)
                        fn.emit("OpStore", d_at(sample_row, op("OpIAdd", feature, uint(d_starts[index]))),
                                f16_or_zero(valid, slope))
                        return
                    sample = op("OpIAdd", base, sample_row)
                    target = fn.emit("OpLoad", f32, frame.element_pointer(target_binding, op(
                        "OpIAdd", op("OpIMul", sample, uint(planned.rows)), target_column)))
                    term, slope = loss_terms(w, loss, y, target)
                    counted = fn.emit("OpLogicalAnd", boolean, valid, fn.emit("OpULessThan", boolean, sample, batch))
                    element = op("OpIAdd", op("OpIMul", row, uint(TILE)), lane_column)
                    fn.emit("OpStore", at(s_mem, s_base, element, f32), fn.emit("OpSelect", f32, counted, term, zero32))
                    gradient = fn.emit("OpFMul", f32, slope, scale)
                    if act is not None:
                        gradient = fn.emit("OpFMul", f32, gradient, derivative(w, act.op, z, y, act.attrs))
                    fn.emit("OpStore", d_at(sample_row, op("OpIAdd", feature, uint(d_starts[index]))),
                            f16_or_zero(counted, gradient))

                elementwise(accumulator, forward)
                if index == last:  # this tile's loss terms, summed per sample by the first 16 invocations
                    with fn.if_(fn.emit("OpULessThan", boolean, lane, uint(TILE))):
                        total = fn.emit("OpLoad", f32, loss_sums[r])
                        for j in range(TILE):
                            total = fn.emit("OpFAdd", f32, total, fn.emit("OpLoad", f32, at(
                                s_mem, s_base, op("OpIAdd", op("OpIMul", lane, uint(TILE)), uint(j)), f32)))
                        fn.emit("OpStore", loss_sums[r], total)
                    fn.barrier("Subgroup")

    with fn.if_(fn.emit("OpULessThan", boolean, lane, uint(TILE))):
        for r, variable in enumerate(loss_sums):
            pointer = frame.element_pointer(loss_binding, op("OpIAdd", base, op("OpIAdd", lane, uint(r * TILE))), f32)
            fn.emit("OpStore", pointer, fn.emit("OpLoad", f32, variable))

    for index in reversed(range(len(layers))):
        layer = layers[index]
        # the delta onto the tape in its layout (`TapeLayout.deltas`)
        region = op("OpIMul", capacity, uint(tape.delta_start(index)))
        if tape.deltas == "samples":  # element (b, m) at region + b rows + m: tiles row-major
            region = op("OpIAdd", region, op("OpIMul", base, uint(layer.rows)))
            layout, tape_stride = row_major, uint(layer.rows)

            def delta_at(row, column, region=region, stride=tape_stride):
                return op("OpIAdd", region, op("OpIAdd", op("OpIMul", row, stride), column))
        else:  # element (b, m) at region + m capacity + b: tiles column-major
            region, layout, tape_stride = op("OpIAdd", region, base), column_major, capacity

            def delta_at(row, column, region=region):
                return op("OpIAdd", region, op("OpIAdd", op("OpIMul", column, capacity), row))

        to_tape(d_mem, d_base, d_stride, d_starts[index], layer.rows, delta_at, layout, tape_stride)
        if index == 0:
            break
        before = plan.layers[index - 1]
        for r in range(SUBGROUP // TILE):
            a_tiles = [at(d_mem, d_base, uint(r * TILE * d_stride + d_starts[index] + k * TILE), f16)
                       for k in range(_tiles(layer.rows))]
            accumulators = products(
                a_tiles, d_stride,
                lambda k, n: load(b_type, weight(layer.weight_offset + k * TILE * layer.cols + n * TILE),
                                  row_major, layer.cols), _tiles(layer.cols))
            for n, accumulator in enumerate(accumulators):
                feature = op("OpIAdd", lane_column, uint(n * TILE))
                valid = fn.emit("OpULessThan", boolean, feature, uint(before.rows))
                column = op("OpIAdd", feature, uint(d_starts[index - 1]))

                def backward(row, value, r=r, valid=valid, column=column):
                    pointer = d_at(op("OpIAdd", row, uint(r * TILE)), column)
                    slope = fn.emit("OpFConvert", f32, fn.emit("OpLoad", f16, pointer))
                    fn.emit("OpStore", pointer, f16_or_zero(valid, fn.emit("OpFMul", f32, value, slope)))

                elementwise(accumulator, backward)

    spirv = frame.finish()
    return Binary("coopvec", spirv, "main", frame.workgroup_size, emitter.bindings, emitter.push_constants, None,
                  FEATURES, frozenset(), f"{plan.graph.name} tiled training step")
