"""What ends a training step on the device: the batch's loss and the step's bookkeeping, with no host.

`loss_tile_shader` sums the per-sample losses of the batch in tiles of `LOSS_TILE`, one workgroup of `REDUCE_WIDTH`
invocations a tile (each invocation adds its `LOSS_TILE // REDUCE_WIDTH` losses, strided by `REDUCE_WIDTH` so that a
subgroup's loads are contiguous, in float32; then a tree in workgroup memory), into one float32 sum per tile,
because one workgroup summing the whole batch took a large share of a step.

`end_step_in_last_group` is the end of the optimizer kernel (`coopnn.shaders.training.optimizer`), in workgroups of
`REDUCE_WIDTH`: each workgroup counts itself finished (the state word `finished`, a device-scope atomic), and the
last one adds the tiles' sums the same way, writes the total and the status word into row `drawn % HISTORY_ROWS` of
the history buffer, clears the status word for the next step (so a step needs no command of its own to clear it: a
fill and the full barriers around it cost more), resets `finished`, and updates the other
training state words (`TRAINING_STATE_FIELDS`): `drawn` counts every step; a step whose status is nonzero, with
`skip_nonfinite`, was skipped by the optimizer, so the loss scale halves (not below `MIN_LOSS_SCALE`) and the
good-step count restarts; any other step counts as an optimizer step, and with `skip_nonfinite` the scale doubles
after `growth_interval` good steps in a row. Every workgroup reads the state words before it counts itself, so none
sees the next step's. No workgroup waits for another, so the end needs no forward-progress guarantee; as a kernel of
its own it had cost a dispatch and the barrier before it
(bench/results/nvidia-h100-80gb-hbm3-2026-11-27-tiled-step-ablation.md). Everything a later step depends on stays on
the device, and no push constant changes from step to step, so a session records a run of steps once and submits it
again.

`loss_tile_shader` bindings: 0 losses (f32), 1 sums (f32, written, one a tile). Push: `count` (`REDUCE_WIDTH` x
tiles), `batch` (samples). Dispatch one workgroup a tile.
The step's end reads the tiles' sums (f32, `terms` of them) and writes the state (u32 words; the scale's bits are a
float32) and the history (f32, `HISTORY_ROWS` rows of two: the loss sum, then 1.0 when the status was nonzero).
"""

from __future__ import annotations

from coopnn.shaders.targets.base import TRAINING_STATE_FIELDS, Binary, ShaderFrame, push_constant_block
from coopnn.shaders.training.shader import finish, load, storage_buffer, store

LOSSES, SUMS = range(2)  # loss_tile_shader's bindings
REDUCE_WIDTH = 256
LOSS_TILE = 8 * REDUCE_WIDTH
HISTORY_WORDS = 2  # per step
HISTORY_ROWS = 1024  # steps a session may run between two reads of the history
MIN_LOSS_SCALE = 1.0 / 1024
STATUS, LOSS_SCALE, GOOD_STEPS, STEPS, DRAWN, FINISHED = (
    TRAINING_STATE_FIELDS.index(f) for f in ("status", "loss_scale", "good_steps", "steps", "drawn", "finished"))
ORDERED = ("NonPrivatePointer",)  # memory operands of a state word's accesses that the step's end is ordered against


def workgroup_adder(frame: ShaderFrame, local):
    """`workgroup_total(value)` for a frame of `REDUCE_WIDTH`-invocation workgroups (`local`: the invocation's index
    in its workgroup): the sum of every invocation's `value`, in invocation 0 (a tree in workgroup memory; every
    invocation of the workgroup must call it)."""
    m, fn, f32 = frame.module, frame.main, frame.f32
    partials = m.global_variable("Workgroup", m.type_array(f32, frame.uint(REDUCE_WIDTH)), name="partials")

    def partial(index):
        return fn.ops.access_chain(m.type_pointer("Workgroup", f32), partials, index)

    def workgroup_total(value):
        fn.ops.store(partial(local), value)
        fn.barrier()
        half = REDUCE_WIDTH // 2
        while half:
            with fn.if_(fn.ops.uint_less(frame.bool, local, frame.uint(half))):
                other = fn.ops.load(f32, partial(fn.ops.int_add(frame.u32, local, frame.uint(half))))
                mine = fn.ops.load(f32, partial(local))
                fn.ops.store(partial(local), fn.ops.float_add(f32, mine, other))
            fn.barrier()
            half //= 2
        return fn.ops.load(f32, partial(frame.zero))

    return workgroup_total


def loss_tile_shader() -> Binary:
    """The kernel that sums the batch's losses in tiles of `LOSS_TILE`, one sum a tile."""
    frame = ShaderFrame((), 32, REDUCE_WIDTH, push_constants=push_constant_block(("count", "u32"), ("batch", "u32")),
                        bounds_check=False)
    fn, u32, f32 = frame.main, frame.u32, frame.f32
    storage_buffer(frame, LOSSES, f32, writable=False, name="losses")
    lane = fn.ops.uint_mod(u32, frame.sample, frame.uint(REDUCE_WIDTH))
    workgroup_total = workgroup_adder(frame, lane)
    storage_buffer(frame, SUMS, f32, writable=True, name="sums")
    tile = fn.ops.uint_div(u32, frame.sample, frame.uint(REDUCE_WIDTH))
    batch = frame.push_value("batch")
    last = fn.ops.int_sub(u32, batch, frame.uint(1))
    first = fn.ops.int_add(u32, fn.ops.int_mul(u32, tile, frame.uint(LOSS_TILE)), lane)
    total = frame.module.constant(f32, 0.0)
    for j in range(LOSS_TILE // REDUCE_WIDTH):
        # every load reads inside the batch (clamped) so none waits on a branch; the ones past it add zero
        index = fn.ops.int_add(u32, first, frame.uint(j * REDUCE_WIDTH))
        inside = fn.ops.uint_less(frame.bool, index, batch)
        value = load(frame, LOSSES, fn.ops.select(u32, inside, index, last))
        total = fn.ops.float_add(f32, total, fn.ops.select(f32, inside, value, frame.module.constant(f32, 0.0)))
    tile_sum = workgroup_total(total)
    with fn.if_(fn.ops.int_equal(frame.bool, lane, frame.zero)):
        store(frame, SUMS, tile, tile_sum)
    return finish("loss_tiles", frame, 2, frozenset())


def end_step_in_last_group(frame: ShaderFrame, local, bindings: tuple[int, int, int], terms,
                           skip_nonfinite: bool, growth_interval: int) -> None:
    """Emits the step's end into `frame` (workgroups of `REDUCE_WIDTH`, every invocation reaching this point; `local`:
    the invocation's index in its workgroup): the last workgroup to get here adds the `terms` sums of binding
    `bindings[0]` and updates the state (`bindings[1]`) and history (`bindings[2]`) words. Every read of a state word
    before this point must be NonPrivatePointer, so that it is ordered before the last workgroup's writes."""
    m, fn, u32, f32 = frame.module, frame.main, frame.u32, frame.f32
    sums, state, history = bindings
    groups = fn.ops.extract(u32, fn.ops.load(m.type_vector(u32, 3), m.builtin_input(
        "NumWorkgroups", m.type_vector(u32, 3))), 0)
    last = m.global_variable("Workgroup", u32, name="last_group")
    fn.barrier(memory=("WorkgroupMemory", "UniformMemory"))
    with fn.if_(fn.ops.int_equal(frame.bool, local, frame.zero)):
        before = fn.ops.atomic_int_add(u32, frame.element_pointer(state, frame.uint(FINISHED), u32),
                                       m.enum_constant("Scope", "Device"),
                                       m.enum_constant("MemorySemantics", "AcquireRelease", "UniformMemory",
                                                       "MakeAvailable", "MakeVisible"), frame.uint(1))
        fn.ops.store(last, fn.ops.select(u32, fn.ops.int_equal(
            frame.bool, before, fn.ops.int_sub(u32, groups, frame.uint(1))), frame.uint(1), frame.zero))
    fn.barrier()
    # uniform in the workgroup (read after the barrier), so the barriers of the sum below are reached by all of it
    with fn.if_(fn.ops.int_not_equal(frame.bool, fn.ops.load(u32, last), frame.zero)):
        workgroup_total = workgroup_adder(frame, local)
        total = fn.variable(f32, name="total", initializer=m.constant(f32, 0.0))
        with fn.for_range(local, terms, frame.uint(REDUCE_WIDTH)) as i:
            fn.ops.store(total, fn.ops.float_add(f32, fn.ops.load(f32, total), load(frame, sums, i)))
        loss_sum = workgroup_total(fn.ops.load(f32, total))
        with fn.if_(fn.ops.int_equal(frame.bool, local, frame.zero)):
            _finish_step(frame, loss_sum, (state, history), skip_nonfinite, growth_interval)


def _finish_step(frame: ShaderFrame, loss_sum, bindings: tuple[int, int], skip_nonfinite: bool,
                 growth_interval: int) -> None:
    """Invocation 0 of the last workgroup: the history row and the state words (`bindings`: state, history)."""
    m, fn, u32, f32 = frame.module, frame.main, frame.u32, frame.f32
    state, history = bindings

    def word(index: int):
        return load(frame, state, frame.uint(index), u32, ORDERED)

    def set_word(index: int, value) -> None:
        store(frame, state, frame.uint(index), value, u32, ORDERED)

    drawn = word(DRAWN)
    row = fn.ops.int_mul(u32, fn.ops.uint_mod(u32, drawn, frame.uint(HISTORY_ROWS)), frame.uint(HISTORY_WORDS))
    store(frame, history, row, loss_sum)
    set_word(DRAWN, fn.ops.int_add(u32, drawn, frame.uint(1)))
    bad = fn.ops.int_not_equal(frame.bool, word(STATUS), frame.zero)
    set_word(STATUS, frame.zero)
    set_word(FINISHED, frame.zero)
    one, zero = m.constant(f32, 1.0), m.constant(f32, 0.0)
    store(frame, history, fn.ops.int_add(u32, row, frame.uint(1)), fn.ops.select(f32, bad, one, zero))

    def count_step() -> None:
        set_word(STEPS, fn.ops.int_add(u32, word(STEPS), frame.uint(1)))

    if not skip_nonfinite:
        count_step()
        return
    scale = fn.ops.bitcast(f32, word(LOSS_SCALE))
    selection = fn.if_(bad)
    with selection:
        halved = fn.ext_inst(f32, "FMax", fn.ops.float_mul(f32, scale, m.constant(f32, 0.5)),
                             m.constant(f32, MIN_LOSS_SCALE))
        set_word(LOSS_SCALE, fn.ops.bitcast(u32, halved))
        set_word(GOOD_STEPS, frame.zero)
        selection.else_()
        count_step()
        good = fn.ops.int_add(u32, word(GOOD_STEPS), frame.uint(1))
        grown = fn.ops.uint_at_least(frame.bool, good, frame.uint(growth_interval))
        set_word(GOOD_STEPS, fn.ops.select(u32, grown, frame.zero, good))
        doubled = fn.ops.float_mul(f32, scale, m.constant(f32, 2.0))
        set_word(LOSS_SCALE, fn.ops.bitcast(u32, fn.ops.select(f32, grown, doubled, scale)))
