"""`StepBookkeeping.after`: the losses of the last steps read from the history ring, whether or not their rows wrap
past its end (a step reads its one row; a run that wraps reads the ring). On lavapipe."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.runtime.vk import shared
from coopnn.shaders.training.step_state import DRAWN, HISTORY_ROWS, HISTORY_WORDS
from coopnn.train.gpu.bookkeeping import StepBookkeeping
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
