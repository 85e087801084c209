"""The training kernels on a Vulkan device (lavapipe in CI, validation layer on where installed): the optimizer steps
match `coopnn.train.optim` (reading the gradient or adding partial gradients), the tape gradient matches numpy's
einsum, partial sums add up, non-finite values set (and a set status skips) as documented, the loss tiles' sums and
the optimizer's step end add up the losses and the latter keeps the state words, a step kernel's frame draws the
rows the numpy sampler draws, and the widening of float16 sums adds a grid's copies."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import BackendUnavailableError
from coopnn.shaders.training.gradients import (SUM_LANES, partial_sum_invocations, partial_sum_shader,
                                               tape_gradient_shader, widen_shader)
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.shaders.targets.sampler import sample_rows
from coopnn.shaders.training.optimizer import SCHEDULE_ROWS, SCHEDULE_WORDS, optimizer_groups, optimizer_shader
from coopnn.shaders.training.step_state import HISTORY_ROWS, LOSS_TILE, MIN_LOSS_SCALE, REDUCE_WIDTH, loss_tile_shader
from coopnn.train.gpu.optimizer_values import optimizer_push, schedule_rows
from coopnn.train.optim import SGD, Adam
from tests.devices import Kernel, assert_no_validation_messages, validation_off_reason, vulkan_skip_reason

pytestmark = pytest.mark.vulkan

FEATURES = frozenset().union(optimizer_shader("adam", "f16", True, 1000).features, partial_sum_shader().features)
COUNT = 3001  # not a multiple of the workgroup size, so the bounds check matters
CHUNKS = 11  # partial gradients the optimizer adds: more than the lanes that add them, not a multiple of them
STEPS = 5
GRADIENT_SCALE = 0.5  # a power of two: the numpy optimizer gets exactly the gradient the shader computes
OPTIMIZERS = {
    "adam": lambda: Adam(lr=1e-2),
    "adam_decay": lambda: Adam(lr=3e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2),
    "sgd": lambda: SGD(lr=0.1),
    "sgd_momentum_dampening_decay": lambda: SGD(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3),
    "sgd_nesterov_decay": lambda: SGD(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-2),
}


@pytest.fixture(scope="module")
def module_context(tmp_path_factory):
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)
    from coopnn.runtime.vk.context import VulkanContext

    try:
        context = VulkanContext(features=FEATURES, validation=validation_off_reason() is None,
                                pipeline_cache_dir=tmp_path_factory.mktemp("pipelines"))
    except BackendUnavailableError as exc:
        pytest.skip(str(exc))
    yield context
    context.close()
    assert_no_validation_messages(context)


@pytest.fixture
def context(module_context):
    """The module's context with the features the training kernels need; validation messages fail the test."""
    module_context.debug_messages.clear()
    yield module_context
    assert_no_validation_messages(module_context)


def state_words(status: int = 0, loss_scale: float = 1.0, good_steps: int = 0, steps: int = 0,
                drawn: int = 0) -> np.ndarray:
    return np.array([status, np.float32(loss_scale).view(np.uint32), good_steps, steps, drawn, 0], np.uint32)


def optimizer_buffers(optimizer, working_dtype: str, master: np.ndarray, status: int, chunks: int = 0,
                      sums: np.ndarray | None = None) -> list[np.ndarray]:
    """The optimizer kernel's buffers: the gradient (zero), or `chunks` partial gradients (zero); then the loss
    tiles' `sums` (one zero unless given) and the loss history (zero) of the step's end."""
    working = np.full(COUNT, 7, np.float16 if working_dtype == "f16" else np.float32)  # a sentinel
    return [master, np.zeros(max(chunks, 1) * COUNT, np.float32), state_words(status), working,
            *[np.zeros(COUNT, np.float32) for _ in optimizer.slots], _schedule(optimizer),
            np.zeros(1, np.float32) if sums is None else sums, np.zeros(2 * HISTORY_ROWS, np.float32)]


def _schedule(optimizer) -> np.ndarray:
    """The schedule ring with the rows of updates 1 .. STEPS where the shader reads them (rows 0 .. STEPS - 1)."""
    ring = np.zeros((SCHEDULE_ROWS, SCHEDULE_WORDS), np.float32)
    ring[:STEPS] = schedule_rows(optimizer, 0, STEPS)
    return ring


def run_optimizer(kernel: Kernel, shader, optimizer, gradient_scale: float, chunks: int = 0,
                  terms: int = 1) -> list[np.ndarray]:
    """One optimizer step (over `chunks` partial gradients where it adds them) and the step's end."""
    partials = {"chunks": chunks} if chunks else {}
    push = optimizer_push(shader, optimizer, COUNT, gradient_scale, terms=terms, **partials)
    return kernel.run(push, optimizer_groups(COUNT, bool(chunks)) * REDUCE_WIDTH)


def in_lane_order(partials: np.ndarray) -> np.ndarray:
    """The sum of the chunks of `partials` as the kernels add them: each of SUM_LANES lanes every SUM_LANES-th chunk
    from its own, then the lanes' sums in lane order, in float32."""
    lanes = []
    for lane in range(SUM_LANES):
        total = np.zeros(partials.shape[1], np.float32)
        for chunk in partials[lane::SUM_LANES]:
            total = total + chunk
        lanes.append(total)
    total = np.zeros(partials.shape[1], np.float32)
    for lane_total in lanes:
        total = total + lane_total
    return total


@pytest.mark.parametrize("chunks", [0, CHUNKS])
@pytest.mark.parametrize("working_dtype", ["f32", "f16"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_steps_match_numpy(context, name, working_dtype, chunks):
    rng = np.random.default_rng(0)
    reference, device_optimizer = OPTIMIZERS[name](), OPTIMIZERS[name]()
    expected = rng.normal(size=COUNT).astype(np.float32)
    shader = optimizer_shader(reference.name, working_dtype, True, 1000, adds_partials=bool(chunks))
    kernel = Kernel(context, shader, optimizer_buffers(device_optimizer, working_dtype, expected.copy(), 0, chunks))
    for step in range(1, STEPS + 1):
        partials = rng.normal(size=(max(chunks, 1), COUNT)).astype(np.float32)
        reference.update({"p": expected}, {"p": in_lane_order(partials) * np.float32(GRADIENT_SCALE)})
        kernel.write(1, partials)
        kernel.write(2, state_words(loss_scale=4.0, steps=step - 1))  # the gradient is divided by the loss scale
        master, _, state, working, *slots, _, _, _ = run_optimizer(kernel, shader, device_optimizer,
                                                                   4 * GRADIENT_SCALE, chunks)
        assert state[3] == step and state[5] == 0  # the step's end counted the step and reset the finished count
    np.testing.assert_allclose(master, expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(working, master.astype(working.dtype))
    for slot_name, slot in zip(reference.slots, slots):
        kept = reference.state[slot_name].get("p", np.zeros(COUNT, np.float32))  # SGD without momentum keeps none
        np.testing.assert_allclose(slot, kept, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("working_dtype", ["f32", "f16"])
def test_the_blocked_copy_gets_each_element_where_its_index_says(context, working_dtype):
    rng = np.random.default_rng(3)
    optimizer = SGD(lr=0.1)
    master = rng.normal(size=COUNT).astype(np.float32)
    index = rng.permutation(COUNT).astype(np.uint32)
    shader = optimizer_shader("sgd", working_dtype, True, 1000, blocked=True)
    buffers = optimizer_buffers(optimizer, working_dtype, master, 0)
    kernel = Kernel(context, shader, buffers + [index, np.full_like(buffers[3], 7)])
    kernel.write(1, rng.normal(size=COUNT).astype(np.float32))
    outputs = run_optimizer(kernel, shader, optimizer, GRADIENT_SCALE)
    master, working, blocked = outputs[0], outputs[3], outputs[-1]
    np.testing.assert_array_equal(working, master.astype(working.dtype))
    np.testing.assert_array_equal(blocked[index], working)


@pytest.mark.parametrize("chunks", [0, CHUNKS])
@pytest.mark.parametrize("skip_nonfinite", [True, False])
def test_a_set_status_skips_the_step_only_when_asked(context, skip_nonfinite, chunks):
    master = np.random.default_rng(1).normal(size=COUNT).astype(np.float32)
    shader = optimizer_shader("adam", "f16", skip_nonfinite, 1000, adds_partials=bool(chunks))
    buffers = optimizer_buffers(Adam(lr=0.1), "f16", master, 1, chunks)
    buffers[1][:COUNT] = 1.0
    kernel = Kernel(context, shader, buffers)
    after = run_optimizer(kernel, shader, Adam(lr=0.1), 1.0, chunks)
    assert after[2][0] == 0 and after[-1][1] == 1  # the step's end cleared the status and recorded it
    if skip_nonfinite:
        for binding in (0, 1, *range(3, len(buffers) - 2)):
            np.testing.assert_array_equal(after[binding], buffers[binding].reshape(-1))
    else:
        np.testing.assert_allclose(after[0], master - np.float32(0.1), rtol=1e-5, atol=1e-6)


def test_the_optimizer_flags_partials_whose_sum_is_not_finite(context):
    """Finite partial gradients whose float32 sum overflows: the step's end records the step as not finite."""
    shader = optimizer_shader("sgd", "f32", False, adds_partials=True)
    buffers = optimizer_buffers(SGD(lr=0.1), "f32", np.zeros(COUNT, np.float32), 0, CHUNKS)
    buffers[1].reshape(CHUNKS, COUNT)[:2, 17] = 3e38
    after = run_optimizer(Kernel(context, shader, buffers), shader, SGD(lr=0.1), 1.0, CHUNKS)
    assert after[-1][1] == 1 and after[2][0] == 0
    assert np.isinf(after[0][17]) and np.isfinite(np.delete(after[0], 17)).all()


def tape_gradient(layout: ParameterLayout, tape_layout: TapeLayout, tape: np.ndarray, batch: int,
                  capacity: int) -> np.ndarray:
    """The flat gradient by the layout.py addresses, with numpy."""
    gradient = np.zeros(layout.size, np.float32)
    for index, layer in enumerate(layout.layers):
        delta_start, input_start = tape_layout.delta_start(index) * capacity, tape_layout.input_start(index) * capacity
        delta = tape[delta_start:delta_start + layer.rows * capacity].reshape(layer.rows, capacity)[:, :batch]
        inputs = tape[input_start:input_start + capacity * layer.cols].reshape(capacity, layer.cols)[:batch]
        gradient[layer.weight_offset:layer.bias_offset] = np.einsum("mb,bk->mk", delta, inputs).ravel()
        gradient[layer.bias_offset:layer.bias_offset + layer.rows] = delta.sum(axis=1)
    return gradient


LAYOUTS = {
    "two_layers": ParameterLayout.of([("w0", "b0", 8, 3), ("w1", "b1", 2, 8)]),
    "three_layers": ParameterLayout.of([("w0", "b0", 32, 5), ("w1", "b1", 32, 32), ("w2", "b2", 3, 32)]),
}


CHUNK = 8  # 29 samples: chunks of 8, 8, 8 and 5


def run_tape_gradient(context, layout: ParameterLayout, tape: np.ndarray, batch: int, capacity: int):
    """The gradient and status of the tape's chunks' partial gradients, added by `partial_sum_shader`."""
    chunks = -(-batch // CHUNK)
    shader = tape_gradient_shader(layout, TapeLayout(layout.layers), CHUNK)
    products = Kernel(context, shader, [tape, np.zeros(chunks * layout.size, np.float32)])
    _, partials = products.run(shader.pack_push(count=layout.size, batch=batch, capacity=capacity), layout.size,
                               chunks)
    sums = partial_sum_shader()
    adding = Kernel(context, sums, [partials, np.zeros(layout.size, np.float32), np.zeros(1, np.uint32)])
    _, gradient, status = adding.run(sums.pack_push(count=layout.size, chunks=chunks),
                                     partial_sum_invocations(layout.size))
    return gradient, status[0]


@pytest.mark.parametrize("name", LAYOUTS)
def test_tape_gradient_matches_einsum(context, name):
    layout, capacity, batch = LAYOUTS[name], 40, 29
    tape_layout = TapeLayout(layout.layers)
    tape = np.random.default_rng(2).normal(size=tape_layout.width * capacity).astype(np.float32)
    gradient, status = run_tape_gradient(context, layout, tape, batch, capacity)
    np.testing.assert_allclose(gradient, tape_gradient(layout, tape_layout, tape, batch, capacity), rtol=1e-5,
                               atol=1e-6)
    assert status == 0


@pytest.mark.parametrize("sample, flagged", [(3, True), (35, False)])
def test_a_nan_in_the_batch_sets_the_status(context, sample, flagged):
    layout, capacity, batch = LAYOUTS["two_layers"], 40, 29
    tape_layout = TapeLayout(layout.layers)
    tape = np.random.default_rng(3).normal(size=tape_layout.width * capacity).astype(np.float32)
    tape[(tape_layout.delta_start(1) + 1) * capacity + sample] = np.nan  # layer 1, row 1
    gradient, status = run_tape_gradient(context, layout, tape, batch, capacity)
    assert status == int(flagged)
    assert np.isnan(gradient).any() == flagged  # samples past the batch are not read


@pytest.mark.parametrize("chunks", [1, 5, 8, 21])  # fewer chunks than lanes, more, and not a multiple of them
def test_partial_sums_add_up_and_flag_overflow(context, chunks):
    count = 1000  # not a multiple of a workgroup's elements
    partials = np.random.default_rng(4).normal(size=(chunks, count)).astype(np.float32)
    shader = partial_sum_shader()
    kernel = Kernel(context, shader, [partials, np.zeros(count + 3, np.float32), np.zeros(1, np.uint32)])
    push = shader.pack_push(count=count, chunks=chunks)
    _, gradient, status = kernel.run(push, partial_sum_invocations(count))
    assert not gradient[count:].any()  # nothing written past the elements
    gradient = gradient[:count]
    np.testing.assert_allclose(gradient, partials.sum(axis=0), rtol=1e-5, atol=1e-6)
    assert status[0] == 0
    partials[:2, 17] = 3e38 if chunks > 1 else np.inf  # finite parts, infinite sum (one chunk: infinite itself)
    kernel.write(0, partials)
    _, gradient, status = kernel.run(push, partial_sum_invocations(count))
    gradient = gradient[:count]
    assert status[0] == 1 and np.isinf(gradient[17]) and np.isfinite(np.delete(gradient, 17)).all()


@pytest.mark.parametrize("batch", [1, LOSS_TILE, 3 * LOSS_TILE + 17])
def test_the_loss_tiles_sum_the_batch_losses(context, batch):
    tiles = -(-batch // LOSS_TILE)
    losses = np.random.default_rng(3).uniform(0, 1, tiles * LOSS_TILE + 5).astype(np.float32)
    losses[batch:] = np.nan  # past the batch: a loss left by an earlier, larger batch must not count
    shader = loss_tile_shader()
    kernel = Kernel(context, shader, [losses, np.full(tiles + 1, -1, np.float32)])
    _, sums = kernel.run(shader.pack_push(count=tiles * REDUCE_WIDTH, batch=batch), tiles * REDUCE_WIDTH)
    expected = [np.sum(losses[t * LOSS_TILE:min(batch, (t + 1) * LOSS_TILE)], dtype=np.float64) for t in range(tiles)]
    np.testing.assert_allclose(sums[:tiles], expected, rtol=1e-6)
    assert sums[tiles] == -1  # one sum a tile, nothing written past them


@pytest.mark.parametrize("chunks", [0, CHUNKS])
@pytest.mark.parametrize("skip_nonfinite", [True, False])
@pytest.mark.parametrize("status", [0, 1])
def test_the_step_end_sums_the_losses_and_keeps_the_state(context, skip_nonfinite, status, chunks):
    """The optimizer's workgroups (12, or 94 adding partials) end the step once, in whichever finishes last, and
    leave the finished count at zero for the next step."""
    terms = 3 * REDUCE_WIDTH + 17
    sums = np.random.default_rng(2).uniform(0, 1, terms).astype(np.float32)
    growth = 3
    shader = optimizer_shader("sgd", "f32", skip_nonfinite, growth, adds_partials=bool(chunks))
    drawn = 2 * HISTORY_ROWS + 2  # the history is a ring: this step's row is 2
    buffers = optimizer_buffers(SGD(lr=0.1), "f32", np.zeros(COUNT, np.float32), status, chunks, sums)
    kernel = Kernel(context, shader, buffers)
    kernel.write(2, state_words(status, 8.0, growth - 1, 41, drawn))
    after = run_optimizer(kernel, shader, SGD(lr=0.1), 1.0, chunks, terms)
    state, history = after[2], after[-1]
    assert history[4] == pytest.approx(float(np.sum(sums, dtype=np.float64)), rel=1e-6)
    assert history[5] == status and not history[:4].any() and not history[6:].any()
    assert state[4] == drawn + 1  # every step draws a batch, skipped or not
    assert state[0] == 0 and state[5] == 0  # cleared for the next step
    scale = float(state[1:2].view(np.float32)[0])
    if not skip_nonfinite:
        assert (scale, state[2], state[3]) == (8.0, growth - 1, 42)
    elif status:  # skipped: the scale halves, the good steps restart, the step is not counted
        assert (scale, state[2], state[3]) == (4.0, 0, 41)
    else:  # the growth_interval-th good step in a row doubles the scale
        assert (scale, state[2], state[3]) == (16.0, 0, 42)


def test_the_loss_scale_does_not_fall_below_its_floor(context):
    shader = optimizer_shader("sgd", "f32", True, 1000)
    buffers = optimizer_buffers(SGD(lr=0.1), "f32", np.zeros(COUNT, np.float32), 1, sums=np.ones(5, np.float32))
    kernel = Kernel(context, shader, buffers)
    kernel.write(2, state_words(1, MIN_LOSS_SCALE))
    state = run_optimizer(kernel, shader, SGD(lr=0.1), 1.0, terms=5)[2]
    assert state[1:2].view(np.float32)[0] == np.float32(MIN_LOSS_SCALE)


def drawn_rows_shader():
    """A kernel in a training step's frame that writes, for each sample, the row its sampler draws."""
    from coopnn.shaders.targets.base import TRAINING_PUSH_CONSTANTS, Binding, ShaderFrame
    from coopnn.shaders.training.shader import finish, store

    bindings = (Binding(0, "output", "rows", 1), Binding(1, "state", "state", 0))
    frame = ShaderFrame(bindings, 32, 64, push_constants=TRAINING_PUSH_CONSTANTS)
    frame.draw_rows()
    store(frame, 0, frame.sample, frame.main.emit("OpBitcast", frame.f32, frame.data_row))  # a float32 buffer
    return finish("drawn rows", frame, 2, frozenset())


@pytest.mark.parametrize("whole", [False, True])
def test_a_step_kernel_reads_the_rows_the_numpy_sampler_draws(context, whole):
    """Padding samples (past `batch`) read the first sample's row."""
    rows, batch, count, seed, step = 1000, 700 if not whole else 1000, 1100, 12345, 77
    shader = drawn_rows_shader()
    kernel = Kernel(context, shader, [np.zeros(count, np.float32), state_words(drawn=step)])
    push = shader.pack_push(count=count, batch=batch, capacity=0, rows=rows, seed=seed, whole=whole)
    drawn, _ = kernel.run(push, count)
    expected = sample_rows(seed, step, batch, rows, whole)
    np.testing.assert_array_equal(drawn.view(np.uint32), np.concatenate([expected, np.full(count - batch, expected[0])]))


@pytest.mark.parametrize("copies, lanes, clears", [(1, 1, False), (4, 1, False), (32, 1, True), (1, 2, True),
                                                   (32, 2, False), (32, 4, True)])
def test_the_widening_adds_the_copies_of_the_shared_elements(make_context, copies, lanes, clears):
    shader = widen_shader(copies, lanes, clears)
    try:
        context = make_context(features=shader.features)
    except BackendUnavailableError as exc:
        pytest.skip(str(exc))
    # whole numbers: the float16 sums are exact; counts and offsets whole vectors of `lanes`
    table, shared, first, to = (1003, 240, 6, 5) if lanes == 1 else (1004, 240, 8, 4)
    shared = shared if copies > 1 else 0
    sums = np.random.default_rng(5).integers(-8, 9, first + table + (copies - 1) * shared).astype(np.float16)
    kernel = Kernel(context, shader, [sums, np.zeros(to + table + 4, np.float32), np.zeros(1, np.uint32)])
    push = shader.pack_push(count=table // lanes, first=first // lanes, to=to // lanes, shared=shared // lanes)
    after, gradient, status = kernel.run(push, table // lanes)
    want = sums[first:first + table].astype(np.float32)
    for copy in range(1, copies):
        start = first + table + (copy - 1) * shared
        want[:shared] += sums[start:start + shared]
    np.testing.assert_array_equal(gradient[to:to + table], want)
    assert not gradient[:to].any() and not gradient[to + table:].any() and status[0] == 0
    # with `clears` every sum read is zero after it (what lies before `first` was not read)
    np.testing.assert_array_equal(after[first:], 0 if clears else sums[first:])
