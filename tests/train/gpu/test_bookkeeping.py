"""`StepBookkeeping`: the losses of the last steps read from the history ring, whether or not their rows wrap past its
end (a step reads its one row; a run that wraps reads the ring), and a block's schedule rows written where the shader
reads them and nowhere else. On lavapipe."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.runtime.vk import shared
from coopnn.shaders.training.step_state import DRAWN, HISTORY_ROWS, HISTORY_WORDS
from coopnn.shaders.training.optimizer import SCHEDULE_ROWS, SCHEDULE_WORDS
from coopnn.train.gpu.bookkeeping import MAX_STEPS_IN_FLIGHT, StepBookkeeping
from coopnn.train.gpu.optimizer_values import schedule_rows
from coopnn.train.optim import Adam

pytestmark = [pytest.mark.vulkan, pytest.mark.usefixtures("require_vulkan")]


@pytest.mark.parametrize("first, steps", [(5, 1), (5, 3), (HISTORY_ROWS - 1, 1), (HISTORY_ROWS - 2, 5),
                                          (3 * HISTORY_ROWS + 7, 4), (0, HISTORY_ROWS)])
def test_after_reads_the_rows_of_the_last_steps(first, steps):
    history = np.zeros((HISTORY_ROWS, HISTORY_WORDS), np.float32)
    history[:, 0] = np.arange(HISTORY_ROWS) + 0.5
    history[:, 1] = -1  # the other words of a row are not losses
    with shared.open_context() as context:
        books = StepBookkeeping(context, Adam())
        try:
            books.history.upload(history)
            books.drawn = first
            words = books.state.read(np.uint32).copy()
            words[DRAWN] = first + steps  # as the step's end leaves it
            books.state.upload(words)
            losses = books.after(steps)
        finally:
            books.destroy()
    np.testing.assert_array_equal(losses, (first + np.arange(steps)) % HISTORY_ROWS + 0.5)
    assert losses.dtype == np.float64 and books.drawn == first + steps


@pytest.mark.parametrize("step_count, done, count", [(0, 0, 1), (10, 5, 20), (SCHEDULE_ROWS - 10, 4, 16),
                                                     (3 * SCHEDULE_ROWS + 1, 0, MAX_STEPS_IN_FLIGHT)])
def test_schedule_updates_writes_the_rows_of_its_block_only(step_count, done, count):
    adam = Adam(lr=0.01)
    with shared.open_context() as context:
        books = StepBookkeeping(context, adam)
        try:
            adam.step_count = step_count
            written = []
            books.schedule.write = lambda data, offset=0: written.append((offset, np.array(data)))
            books.schedule_updates(done, count)
            with pytest.raises(ValueError, match="at most"):
                books.schedule_updates(0, MAX_STEPS_IN_FLIGHT + 1)
        finally:
            del books.schedule.write
            books.destroy()
    ring = np.full((SCHEDULE_ROWS, SCHEDULE_WORDS), np.nan, np.float32)
    for offset, rows in written:
        ring[offset // (4 * SCHEDULE_WORDS):][:len(rows)] = rows
    updates = step_count + done + 1 + np.arange(count)  # update t reads row (t - 1) mod SCHEDULE_ROWS
    np.testing.assert_array_equal(ring[(updates - 1) % SCHEDULE_ROWS], schedule_rows(adam, step_count + done, count))
    assert np.isnan(ring).sum() == SCHEDULE_WORDS * (SCHEDULE_ROWS - count)  # no other row written
