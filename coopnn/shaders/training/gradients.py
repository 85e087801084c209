"""Weight gradients from the tape, and the sum of partial gradients, one invocation per flat parameter element.

`tape_gradient_shader`: bindings 0 tape (f32), 1 partials (f32, written: one flat parameter array per chunk of
`chunk` samples); push `count` (elements of the flat parameter arrays), `batch` (samples in this step), `capacity`
(the tape's); dispatched (elements, chunks). For chunk c, a weight element (layer l, row m, column k) gets the sum
over its samples b of delta_l[m, b] * input_l[b, k], a bias element (l, m) the sum of delta_l[m, b], at the tape
addresses layout.py describes. `partial_sum_shader` then adds the chunks: the batch's samples are summed by many
invocations at once rather than each parameter's by one.

`partial_sum_shader`: bindings 0 partials (f32, `chunks` consecutive arrays of `count` elements), 1 gradient,
2 status; push `count`, `chunks`; gradient[p] = sum over c of partials[c * count + p]; dispatched with
`partial_sum_invocations(count)` invocations. A workgroup takes `SUM_COLUMNS` consecutive elements; each of its
`SUM_LANES` subgroups adds every `SUM_LANES`-th chunk (from its own) for them, then the first adds the lanes' sums
in lane order. One invocation adding every chunk of an element was slow: a chain of dependent loads with few
invocations to overlap them. `add_partials` is that sum for
other kernels: the optimizer adds a step's partial gradients itself (`coopnn.shaders.training.optimizer`), in the
same order, where the kernels that wrote them flag the status of non-finite ones.

`widen_shader`: bindings 0 float16 sums (the outer-product method's accumulators, row-major in the flat order, or a
grid's float16 table gradient), 1 gradient, 2 status; push `count`, `first` (where the sums start, in halves), `to`
(the first gradient element written) and `shared`; gradient[to + p] = sums[first + p], plus for the first `shared`
elements the `copies` - 1 more copies of them laid out after the `count` sums (`copies` the count the kernel is
built for: a grid's contended levels added into copies of their own,
`coopnn.backends.coopvec.table_atomics.float16_pairs`).

All add in float32, in index order (`partial_sum_shader` in the lanes' order, `widen_shader`'s copies as a balanced
tree); the last two set status[0] to 1 (an atomic OR) when a sum is NaN or infinite (a float16 sum that overflowed
is infinite).
"""

from __future__ import annotations

from coopnn.shaders.spirv.ops import Ops
from coopnn.shaders.targets.base import Binary, ShaderFrame, push_constant_block
from coopnn.shaders.training.indices import Indices
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.shaders.training.shader import finish, load, storage_buffer, store, training_frame, vector_view

SOURCE, GRADIENT, STATUS = range(3)
# Device-scope atomics under the Vulkan memory model need this capability, hence this feature.
FEATURES = frozenset({"vulkanMemoryModelDeviceScope"})
SUM_COLUMNS = 32  # elements a partial-sum workgroup adds up: one subgroup's contiguous loads
SUM_LANES = 8  # subgroups of a partial-sum workgroup, each adding every SUM_LANES-th chunk
WIDEN_LANES = (1, 2, 4)  # elements an invocation of `widen_shader` may widen


def _frame(*push: tuple[str, str], source: str, source_width: int = 32, target: str = "gradient",
           status: bool = True, workgroup: int | None = None, lanes: int = 1,
           source_writable: bool = False) -> ShaderFrame:
    """The frame of a kernel over flat parameter elements: one invocation per element (bounds-checked), or with
    `workgroup`, workgroups of that many invocations that cooperate (no bounds check: all reach its barriers); with
    `lanes`, source and target are arrays of vectors of that many elements; `source_writable`: the kernel writes
    its source too."""
    block = push_constant_block(("count", "u32"), *push)
    frame = (training_frame(block) if workgroup is None
             else ShaderFrame((), 32, workgroup, push_constants=block, bounds_check=False))
    m = frame.module
    if lanes == 1:
        storage_buffer(frame, SOURCE, m.type_float(source_width), writable=source_writable, name=source)
        storage_buffer(frame, GRADIENT, frame.f32, writable=True, name=target)
    else:
        frame.buffers[SOURCE] = vector_view(frame, SOURCE, m.type_float(source_width), lanes,
                                            writable=source_writable, name=source)
        frame.buffers[GRADIENT] = vector_view(frame, GRADIENT, frame.f32, lanes, writable=True, name=target)
    if status:
        storage_buffer(frame, STATUS, frame.u32, writable=True, name="status")
    return frame


def _accumulate(frame: ShaderFrame, count, term):
    """term(0) + term(1) + ... + term(count - 1), added in that order in float32 (term(i) is emitted in the loop)."""
    fn, ix = frame.main, Indices(frame)
    with fn.loop() as loop:
        index = loop.phi(frame.u32, frame.zero)
        total = loop.phi(frame.f32, frame.module.constant(frame.f32, 0.0))
        loop.while_(ix.less(index, count))
        value = term(index)
        loop.continue_()
        loop.set_next(index, ix.add(index, frame.uint(1)))
        loop.set_next(total, ix.ops.float_add(frame.f32, total, value))
    return total


def _store_and_check(frame: ShaderFrame, total, element=None, lanes: int = 1) -> None:
    """gradient[element] = total (element: the invocation's sample index unless given; a vector of `lanes` float32
    where that is more than 1); status[0] |= 1 unless total is finite."""
    wide = frame.f32 if lanes == 1 else frame.module.type_vector(frame.f32, lanes)
    store(frame, GRADIENT, frame.sample if element is None else element, total, wide)
    # a vector is finite exactly when the sum of its components is, where they are float16 sums (far below float32's
    # limit)
    flag_nonfinite(frame, total if lanes == 1 else _pairwise_sum(
        frame.main.ops, frame.f32, [frame.main.ops.extract(frame.f32, total, k) for k in range(lanes)]), STATUS)


def flag_nonfinite(frame: ShaderFrame, value, status: int) -> None:
    """Word 0 of binding `status` |= 1 unless float `value` is finite."""
    flag_nonfinite_at(frame, value, frame.element_pointer(status, frame.zero, frame.u32))


def flag_nonfinite_at(frame: ShaderFrame, value, word) -> None:
    """The u32 at pointer `word` |= 1 unless float `value` is finite."""
    fn, m, ix = frame.main, frame.module, Indices(frame)
    not_finite = ix.either(ix.ops.is_nan(frame.bool, value), ix.ops.is_inf(frame.bool, value))
    with fn.if_(not_finite):
        # Relaxed: the status is read by later dispatches, after the barrier between them, or by the step's end, after
        # the release of the optimizer's count of finished workgroups (`step_state.end_step_in_last_group`).
        ix.ops.atomic_or(frame.u32, word, m.enum_constant("Scope", "Device"),
                         m.enum_constant("MemorySemantics", "Relaxed"), frame.uint(1))


def tape_gradient_shader(parameters: ParameterLayout, tape: TapeLayout, chunk: int) -> Binary:
    """Every weight and bias element's partial gradient over each chunk of `chunk` samples, from the deltas and
    inputs the tape holds."""
    tape.require_deltas("features", "the tape gradients")
    frame = _frame(("batch", "u32"), ("capacity", "u32"), source="tape", target="partials", status=False)
    fn, u32, p = frame.main, frame.u32, frame.sample
    ix, ops = Indices(frame), Ops(fn)
    batch, capacity = frame.push_value("batch"), frame.push_value("capacity")
    chunk_index = ops.extract(u32, frame.invocation_id, 1, name="chunk")
    first = ix.mul(chunk_index, frame.uint(chunk))
    # the dispatch has a chunk for every `chunk` samples of the batch begun, so first < batch
    samples = fn.ext_inst(u32, "UMin", ix.sub(batch, first), frame.uint(chunk))
    false, true = frame.module.constant(frame.bool, False), frame.module.constant(frame.bool, True)
    # Element p lies in the last segment (a layer's weight or bias) starting at or before it. Each segment gives
    # (row m, column k, delta region, input region, columns, is bias); the selects keep the last one that applies.
    chosen = None
    for index, layer in enumerate(parameters.layers):
        regions = (frame.uint(tape.delta_start(index)), frame.uint(tape.input_start(index)), frame.uint(layer.cols))
        local = ix.sub(p, frame.uint(layer.weight_offset))
        weight = (ix.div(local, frame.uint(layer.cols)),
                  ix.mod(local, frame.uint(layer.cols)), *regions, false)
        bias = (ix.sub(p, frame.uint(layer.bias_offset)), frame.zero, *regions, true)
        for start, segment in ((layer.weight_offset, weight), (layer.bias_offset, bias)):
            if chosen is None:
                chosen = segment
                continue
            inside = ix.at_least(p, frame.uint(start))
            chosen = tuple(old if new is old else ops.select(frame.module.type_of(new), inside, new, old)
                           for new, old in zip(segment, chosen))
    row, column, delta_region, input_region, columns, is_bias = chosen
    delta_row = ix.mul(ix.add(delta_region, row), capacity)
    input_column = ix.add(ix.mul(input_region, capacity), column)

    def term(i):
        b = ix.add(first, i)
        delta = load(frame, SOURCE, ix.add(delta_row, b))
        # A bias element reads column 0 of the layer's input too (a valid address) and ignores it: one loop serves
        # both kinds of element.
        x = load(frame, SOURCE, ix.add(input_column, ix.mul(b, columns)))
        return ops.select(frame.f32, is_bias, delta, ops.float_mul(frame.f32, delta, x))

    partial = ix.add(ix.mul(chunk_index, frame.push_value("count")), p)
    store(frame, GRADIENT, partial, _accumulate(frame, samples, term))
    return finish("tape_gradient", frame, 2, frozenset())


def partial_sum_invocations(count: int) -> int:
    """Invocations `partial_sum_shader` is dispatched with for `count` elements."""
    return -(-count // SUM_COLUMNS) * SUM_COLUMNS * SUM_LANES


def partial_sum_shader() -> Binary:
    """The sum of `chunks` partial gradients, element by element."""
    frame = _frame(("chunks", "u32"), source="partials", workgroup=SUM_COLUMNS * SUM_LANES)
    element, first, total = add_partials(frame, SOURCE)
    with frame.main.if_(first):
        _store_and_check(frame, total, element)
    return finish("partial_sum", frame, 3, FEATURES)


def add_partials(frame: ShaderFrame, binding: int):
    """Emits the sum of the `chunks` (push constant) partial gradients of binding `binding` (f32, `chunks` arrays of
    `count` elements) into `frame`, in workgroups of SUM_COLUMNS x SUM_LANES invocations (every one must get here):
    (element, first, total) where `first` says the invocation holds the sum `total` of its element."""
    width = SUM_COLUMNS * SUM_LANES
    fn, m, u32, f32 = frame.main, frame.module, frame.u32, frame.f32
    ix, ops = Indices(frame), Ops(fn)
    count, chunks = frame.push_value("count"), frame.push_value("chunks")
    local = ix.mod(frame.sample, frame.uint(width))
    lane, column = (ix.div(local, frame.uint(SUM_COLUMNS)),
                    ix.mod(local, frame.uint(SUM_COLUMNS)))
    element = ix.add(ix.mul(ix.div(frame.sample, frame.uint(width)),
                            frame.uint(SUM_COLUMNS)), column)
    inside = ix.less(element, count)
    # past the last element the invocation still takes part in the barrier; it reads the last element instead
    read = ops.select(u32, inside, element, ix.sub(count, frame.uint(1)))
    lane_chunks = ix.div(ix.add(ix.sub(chunks, lane),
                                frame.uint(SUM_LANES - 1)), frame.uint(SUM_LANES))

    def term(i):
        chunk = ix.add(lane, ix.mul(i, frame.uint(SUM_LANES)))
        return load(frame, binding, ix.add(ix.mul(chunk, count), read))

    # a lane past the last chunk (chunks < SUM_LANES) adds nothing: chunks - lane wraps, so clamp its count to zero
    has_chunks = ix.less(lane, chunks)
    lane_total = _accumulate(frame, ops.select(u32, has_chunks, lane_chunks, frame.zero), term)
    sums = m.global_variable("Workgroup", m.type_array(f32, frame.uint(width)), name="lane_sums")

    def lane_sum(index):
        return ops.access_chain(m.type_pointer("Workgroup", f32), sums, index)

    ops.store(lane_sum(local), lane_total)
    fn.barrier()
    first = ix.both(inside, ix.equal(lane, frame.zero))
    total = m.constant(f32, 0.0)
    for other in range(SUM_LANES):
        # every invocation adds (the lanes' sums are in workgroup memory), so the sum needs no branch of its own
        value = ops.load(f32, lane_sum(ix.add(column, frame.uint(other * SUM_COLUMNS))))
        total = ops.float_add(f32, total, value)
    return element, first, total


def widen_shader(copies: int = 1, lanes: int = 1, clears: bool = False) -> Binary:
    """float16 gradient sums widened to the float32 gradient, the first `shared` elements summed over `copies`
    copies (the first the sums themselves, the others after them, `shared` elements each). The copies are a count
    the kernel is built for, their loads unrolled and summed as a balanced tree; on tcnn's image grid that widened
    in 0.0214 ms on the H200 against 0.0228 with a loop over them
    (bench/results/nvidia-h200-2026-12-03-5f3407b-step-stages.md). An invocation widens `lanes` consecutive
    elements (1, 2 or 4) with vector loads and stores, so the push values are counted in vectors of that many. With
    `clears`, it zeroes every sum it read, so the sums are zero for the next step without a fill of their own."""
    if lanes not in WIDEN_LANES:
        raise ValueError(f"lanes must be one of {WIDEN_LANES}, not {lanes}")
    frame = _frame(("first", "u32"), ("to", "u32"), ("shared", "u32"), source="sums", source_width=16, lanes=lanes,
                   source_writable=clears)
    ix, m = Indices(frame), frame.module
    half, wide = (m.type_float(16), frame.f32) if lanes == 1 else (
        m.type_vector(m.type_float(16), lanes), m.type_vector(frame.f32, lanes))
    count, first, shared = frame.push_value("count"), frame.push_value("first"), frame.push_value("shared")
    zero = m.constant_null(half)

    def widened(index):
        at = ix.add(first, index)
        value = ix.ops.float_convert(wide, load(frame, SOURCE, at, half))
        if clears:
            store(frame, SOURCE, at, zero, half)
        return value

    total = frame.main.variable(wide)
    ix.ops.store(total, widened(frame.sample))
    if copies > 1:
        with frame.main.if_(ix.less(frame.sample, shared)):
            terms = [widened(ix.add(ix.add(count, ix.mul(frame.uint(k - 1), shared)), frame.sample))
                     for k in range(1, copies)]
            ix.ops.store(total, _pairwise_sum(ix.ops, wide, [ix.ops.load(wide, total), *terms]))
    _store_and_check(frame, ix.ops.load(wide, total), ix.add(frame.push_value("to"), frame.sample), lanes)
    return finish("widen_gradient", frame, 3, FEATURES | {"shaderFloat16", "storageBuffer16BitAccess"})


def widen_lanes(*counts: int) -> int:
    """The most `WIDEN_LANES` dividing every one of `counts` (element counts and offsets of a widening)."""
    return max(lanes for lanes in WIDEN_LANES if all(count % lanes == 0 for count in counts))


def _pairwise_sum(ops, f32, terms: list):
    """The sum of `terms` as a balanced tree of float additions (no long chain of dependent adds)."""
    while len(terms) > 1:
        terms = [ops.float_add(f32, terms[k], terms[k + 1]) if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return terms[0]
