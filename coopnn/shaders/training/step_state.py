"""The kernels that end a training step on the device: the batch's loss and the step's bookkeeping, with no host.

`loss_tile_shader` sums the per-sample losses of the batch in tiles of `LOSS_TILE`, one workgroup of `REDUCE_WIDTH`
invocations a tile (each invocation adds its `LOSS_TILE // REDUCE_WIDTH` losses, strided by `REDUCE_WIDTH` so that a
subgroup's loads are contiguous, in float32; then a tree in workgroup memory), into one float32 sum per tile: on the
H100 one workgroup summing the whole batch took 0.1 ms of a 0.43 ms step at 2^18 samples, a quarter of it.
`step_end_shader` runs as one workgroup of `REDUCE_WIDTH` invocations after the optimizer. It adds the tiles' sums
the same way, writes the total and the status word into row `drawn % HISTORY_ROWS` of the history buffer, clears the
status word for the next step (so a step needs no command of its own to clear it: a fill and the full barriers around
it cost about 4 us of a step on the H100), and updates the other training state words (`TRAINING_STATE_FIELDS`):
`drawn` counts every step; a step whose status is
nonzero, with `skip_nonfinite`, was skipped by the optimizer, so the loss scale halves (not below `MIN_LOSS_SCALE`)
and the good-step count restarts; any other step counts as an optimizer step, and with `skip_nonfinite` the scale
doubles after `growth_interval` good steps in a row. Everything a later step depends on stays on the device, and no
push constant changes from step to step, so a session records a run of steps once and submits it again.

`loss_tile_shader` bindings: 0 losses (f32), 1 sums (f32, written, one a tile). Push: `count` (`REDUCE_WIDTH` x
tiles), `batch` (samples). Dispatch one workgroup a tile.
`step_end_shader` bindings: 0 sums (f32), 1 state (u32 words; the scale's bits are a float32), 2 history (f32,
`HISTORY_ROWS` rows of two: the loss sum, then 1.0 when the status was nonzero). Push: `count` (`REDUCE_WIDTH`),
`terms` (the sums to add). Dispatch one workgroup.
"""

from __future__ import annotations

from coopnn.shaders.targets.base import TRAINING_STATE_FIELDS, Binary, ShaderFrame, push_constant_block
from coopnn.shaders.training.shader import finish, load, storage_buffer, store

LOSSES, STATE, HISTORY = range(3)
SUMS = 1  # loss_tile_shader's output binding
REDUCE_WIDTH = 256
LOSS_TILE = 8 * REDUCE_WIDTH
HISTORY_WORDS = 2  # per step
HISTORY_ROWS = 1024  # steps a session may run between two reads of the history
MIN_LOSS_SCALE = 1.0 / 1024
STATUS, LOSS_SCALE, GOOD_STEPS, STEPS, DRAWN = (TRAINING_STATE_FIELDS.index(f)
                                                for f in ("status", "loss_scale", "good_steps", "steps", "drawn"))


def _reduce_frame(push_names: tuple[str, ...], terms: str):
    """A frame of `REDUCE_WIDTH`-invocation workgroups reading float32 binding 0 (named `terms`), the invocation's
    index in its workgroup, and the function `workgroup_total(value)` that returns, in invocation 0 of the workgroup,
    the sum of every invocation's `value` (a tree in workgroup memory; every invocation must call it)."""
    push = push_constant_block(*((name, "u32") for name in push_names))
    frame = ShaderFrame((), 32, REDUCE_WIDTH, push_constants=push, bounds_check=False)
    m, fn, f32 = frame.module, frame.main, frame.f32
    storage_buffer(frame, LOSSES, f32, writable=False, name=terms)
    partials = m.global_variable("Workgroup", m.type_array(f32, frame.uint(REDUCE_WIDTH)), name="partials")
    lane = fn.emit("OpUMod", frame.u32, frame.sample, frame.uint(REDUCE_WIDTH))

    def partial(index):
        return fn.emit("OpAccessChain", m.type_pointer("Workgroup", f32), partials, index)

    def workgroup_total(value):
        fn.emit("OpStore", partial(lane), value)
        fn.barrier()
        half = REDUCE_WIDTH // 2
        while half:
            with fn.if_(fn.emit("OpULessThan", frame.bool, lane, frame.uint(half))):
                other = fn.emit("OpLoad", f32, partial(fn.emit("OpIAdd", frame.u32, lane, frame.uint(half))))
                fn.emit("OpStore", partial(lane), fn.emit("OpFAdd", f32, fn.emit("OpLoad", f32, partial(lane)), other))
            fn.barrier()
            half //= 2
        return fn.emit("OpLoad", f32, partial(frame.zero))

    return frame, lane, workgroup_total


def loss_tile_shader() -> Binary:
    """The kernel that sums the batch's losses in tiles of `LOSS_TILE`, one sum a tile."""
    frame, lane, workgroup_total = _reduce_frame(("count", "batch"), "losses")
    fn, u32, f32 = frame.main, frame.u32, frame.f32
    storage_buffer(frame, SUMS, f32, writable=True, name="sums")
    tile = fn.emit("OpUDiv", u32, frame.sample, frame.uint(REDUCE_WIDTH))
    batch = frame.push_value("batch")
    last = fn.emit("OpISub", u32, batch, frame.uint(1))
    first = fn.emit("OpIAdd", u32, fn.emit("OpIMul", u32, tile, frame.uint(LOSS_TILE)), lane)
    total = frame.module.constant(f32, 0.0)
    for j in range(LOSS_TILE // REDUCE_WIDTH):
        # every load reads inside the batch (clamped) so none waits on a branch; the ones past it add zero
        index = fn.emit("OpIAdd", u32, first, frame.uint(j * REDUCE_WIDTH))
        inside = fn.emit("OpULessThan", frame.bool, index, batch)
        value = load(frame, LOSSES, fn.emit("OpSelect", u32, inside, index, last))
        total = fn.emit("OpFAdd", f32, total, fn.emit("OpSelect", f32, inside, value, frame.module.constant(f32, 0.0)))
    tile_sum = workgroup_total(total)
    with fn.if_(fn.emit("OpIEqual", frame.bool, lane, frame.zero)):
        store(frame, SUMS, tile, tile_sum)
    return finish("loss_tiles", frame, 2, frozenset())


def step_end_shader(skip_nonfinite: bool, growth_interval: int) -> Binary:
    """The step-ending kernel of a session that skips non-finite steps (`skip_nonfinite`, with dynamic loss scaling
    doubling after `growth_interval` good steps) or counts every step."""
    frame, lane, workgroup_total = _reduce_frame(("count", "terms"), "sums")
    fn, f32 = frame.main, frame.f32
    storage_buffer(frame, STATE, frame.u32, writable=True, name="state")
    storage_buffer(frame, HISTORY, f32, writable=True, name="history")
    total = fn.variable(f32, name="total", initializer=frame.module.constant(f32, 0.0))
    with fn.for_range(lane, frame.push_value("terms"), frame.uint(REDUCE_WIDTH)) as i:
        fn.emit("OpStore", total, fn.emit("OpFAdd", f32, fn.emit("OpLoad", f32, total), load(frame, LOSSES, i)))
    loss_sum = workgroup_total(fn.emit("OpLoad", f32, total))
    with fn.if_(fn.emit("OpIEqual", frame.bool, lane, frame.zero)):
        _finish_step(frame, loss_sum, skip_nonfinite, growth_interval)
    name = "step_end" + (f"_skip_nonfinite_{growth_interval}" if skip_nonfinite else "")
    return finish(name, frame, 3, frozenset())


def _finish_step(frame: ShaderFrame, loss_sum, skip_nonfinite: bool, growth_interval: int) -> None:
    """Invocation 0: the history row and the state words."""
    m, fn, u32, f32 = frame.module, frame.main, frame.u32, frame.f32
    drawn = load(frame, STATE, frame.uint(DRAWN), u32)
    row = fn.emit("OpIMul", u32, fn.emit("OpUMod", u32, drawn, frame.uint(HISTORY_ROWS)), frame.uint(HISTORY_WORDS))
    store(frame, HISTORY, row, loss_sum)
    store(frame, STATE, frame.uint(DRAWN), fn.emit("OpIAdd", u32, drawn, frame.uint(1)), u32)
    bad = fn.emit("OpINotEqual", frame.bool, load(frame, STATE, frame.uint(STATUS), u32), frame.zero)
    store(frame, STATE, frame.uint(STATUS), frame.zero, u32)
    one, zero = m.constant(f32, 1.0), m.constant(f32, 0.0)
    store(frame, HISTORY, fn.emit("OpIAdd", u32, row, frame.uint(1)), fn.emit("OpSelect", f32, bad, one, zero))

    def word(index: int):
        return load(frame, STATE, frame.uint(index), u32)

    def set_word(index: int, value) -> None:
        store(frame, STATE, frame.uint(index), value, u32)

    def count_step() -> None:
        set_word(STEPS, fn.emit("OpIAdd", u32, word(STEPS), frame.uint(1)))

    if not skip_nonfinite:
        count_step()
        return
    scale = fn.emit("OpBitcast", f32, word(LOSS_SCALE))
    selection = fn.if_(bad)
    with selection:
        halved = fn.ext_inst(f32, "FMax", fn.emit("OpFMul", f32, scale, m.constant(f32, 0.5)),
                             m.constant(f32, MIN_LOSS_SCALE))
        set_word(LOSS_SCALE, fn.emit("OpBitcast", u32, halved))
        set_word(GOOD_STEPS, frame.zero)
        selection.else_()
        count_step()
        good = fn.emit("OpIAdd", u32, word(GOOD_STEPS), frame.uint(1))
        grown = fn.emit("OpUGreaterThanEqual", frame.bool, good, frame.uint(growth_interval))
        set_word(GOOD_STEPS, fn.emit("OpSelect", u32, grown, frame.zero, good))
        doubled = fn.emit("OpFMul", f32, scale, m.constant(f32, 2.0))
        set_word(LOSS_SCALE, fn.emit("OpBitcast", u32, fn.emit("OpSelect", f32, grown, doubled, scale)))
