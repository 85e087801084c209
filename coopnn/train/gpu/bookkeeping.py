"""The buffers a training session keeps its bookkeeping in on the device, and their host mirrors.

`StepBookkeeping` owns the state words the kernels of a step read and update (`TRAINING_STATE_FIELDS`: status, loss
scale, good steps, optimizer steps, batches drawn, the optimizer's finished workgroups), the loss history the step's
end writes (a ring of `HISTORY_ROWS` rows indexed by the batches drawn) and the optimizer's schedule (a ring of
`SCHEDULE_ROWS` rows indexed by the optimizer steps). The host keeps a mirror of the state words: it reads them after
every run of steps, and before one it uploads them only where it changed them (a loaded checkpoint, a new loss scale,
a trainer whose step count differs), so that steps run back to back leave the device's words alone.

A run of steps may be longer than either ring when it is submitted in blocks: the host writes each block's schedule
rows before submitting it and reads its losses once it has finished, with fewer steps in flight than a ring holds.
"""

from __future__ import annotations

import numpy as np

from coopnn.shaders.targets.base import TRAINING_STATE_FIELDS
from coopnn.shaders.training.optimizer import SCHEDULE_ROWS, SCHEDULE_WORDS
from coopnn.shaders.training.step_state import DRAWN, GOOD_STEPS, HISTORY_ROWS, HISTORY_WORDS, LOSS_SCALE, STEPS
from coopnn.train.gpu.optimizer_values import schedule_rows
from coopnn.train.optim import Optimizer

MAX_STEPS_IN_FLIGHT = min(HISTORY_ROWS, SCHEDULE_ROWS)  # steps submitted and not yet read back, at most


class StepBookkeeping:
    """State, history and schedule buffers on `context` for `optimizer` (whose `step_count` mirrors the state's)."""

    def __init__(self, context, optimizer: Optimizer):
        from coopnn.runtime.vk.memory import HostAccess

        self.optimizer = optimizer
        self.loss_scale, self.good_steps, self.drawn = 1.0, 0, 0
        self.state = context.create_buffer(4 * len(TRAINING_STATE_FIELDS), HostAccess.READ_WRITE)
        self.history = context.create_buffer(4 * HISTORY_WORDS * HISTORY_ROWS, HostAccess.READ)
        self.schedule = context.create_buffer(4 * SCHEDULE_WORDS * SCHEDULE_ROWS, HostAccess.WRITE)
        self._on_device: np.ndarray | None = None
        self.sync()

    def _words(self) -> np.ndarray:
        words = np.zeros(len(TRAINING_STATE_FIELDS), np.uint32)
        words[LOSS_SCALE] = np.float32(self.loss_scale).view(np.uint32)
        words[GOOD_STEPS], words[STEPS], words[DRAWN] = self.good_steps, self.optimizer.step_count, self.drawn
        return words

    def sync(self) -> None:
        """Upload the host's state words if they differ from the device's (the status word starts clear)."""
        words = self._words()
        if self._on_device is None or not np.array_equal(words, self._on_device):
            self.state.upload(words)
            self._on_device = words

    def forget_device_state(self) -> None:
        """The device's state words are unknown (a run was cut short): the next `sync` uploads the host's."""
        self._on_device = None

    def before(self, steps: int, first_drawn: int | None = None) -> None:
        """Ready the device for `steps` steps run together (numbering batches from `first_drawn` when given)."""
        self.start(first_drawn)
        self.schedule_updates(0, steps)

    def start(self, first_drawn: int | None = None) -> None:
        """Ready the device for a run of steps (numbering batches from `first_drawn` when given): state words
        synchronised. The run's blocks then write their schedule rows (`schedule_updates`)."""
        if first_drawn is not None:
            self.drawn = first_drawn
        self.sync()

    def schedule_updates(self, done: int, count: int) -> None:
        """Write the schedule rows of the run's updates `done` + 1 .. `done` + `count` (counted from the optimizer's
        step count at the run's start) where the shader reads them, and no other rows: steps in flight read theirs.
        A step the loss scale skips leaves the update count behind; its rows were written with the run's earlier
        blocks."""
        if count > MAX_STEPS_IN_FLIGHT:
            raise ValueError(f"at most {MAX_STEPS_IN_FLIGHT} steps run between two reads, not {count}")
        first = self.optimizer.step_count + done
        rows, start = schedule_rows(self.optimizer, first, count), first % SCHEDULE_ROWS
        head = min(count, SCHEDULE_ROWS - start)
        self.schedule.write(rows[:head], start * rows.itemsize * SCHEDULE_WORDS)
        if head < count:
            self.schedule.write(rows[head:])

    def after(self, steps: int) -> np.ndarray:
        """Read the state words and the loss sums (float64) of the last `steps` steps."""
        first = self.drawn
        self.read_state()
        return self.losses(first, steps)

    def read_state(self) -> None:
        """Take the state words the device holds once no step is in flight: the host's mirror and counters."""
        words = self.state.read(np.uint32, len(TRAINING_STATE_FIELDS)).copy()
        self._on_device = words
        self.loss_scale = float(words[LOSS_SCALE:LOSS_SCALE + 1].view(np.float32)[0])
        self.good_steps, self.optimizer.step_count, self.drawn = (int(words[GOOD_STEPS]), int(words[STEPS]),
                                                                  int(words[DRAWN]))

    def losses(self, first: int, steps: int) -> np.ndarray:
        """The loss sums (float64) of the `steps` batches numbered from `first`, which have finished."""
        start = first % HISTORY_ROWS
        if start + steps <= HISTORY_ROWS:  # only the rows wanted: a step reads one, not the whole ring
            rows = self.history.read(np.float32, HISTORY_WORDS * steps, 4 * HISTORY_WORDS * start)
            return rows.reshape(steps, HISTORY_WORDS)[:, 0].astype(np.float64)
        history = self.history.read(np.float32, HISTORY_WORDS * HISTORY_ROWS).reshape(HISTORY_ROWS, HISTORY_WORDS)
        return history[(first + np.arange(steps)) % HISTORY_ROWS, 0].astype(np.float64)

    def downloads(self) -> dict:
        """What a submission of steps brings back (STAGED buffers only), as `context.run` takes it."""
        from coopnn.runtime.vk.memory import Placement

        return {b: (0, b.size) for b in (self.state, self.history) if b.placement is Placement.STAGED}

    def destroy(self) -> None:
        for buffer in (self.state, self.history, self.schedule):
            buffer.destroy()
