"""`RecordedRuns`: how a `KernelTrainingSession` submits steps, recorded once and submitted again.

`run_steps` runs any number of steps on a data set already on the device (`upload_data`), as blocks of `BLOCKS`
steps: one recording of a step for the data set, batch size and settings, made on first use and kept (`RECORDINGS`
of them, least recently used out), whose submissions run it as many times as a block has steps, on `LANES` lanes in
turn. The host writes each block's schedule rows before submitting it and reads its losses once it has finished, so a
whole fit may be one run with the GPU never waiting for the host; `_step_recording` keeps the recording of a single
`Trainer.step` the same way. What a step dispatches is the session's (`_forward_backward`, `_update`).
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Mapping

import numpy as np

from coopnn.errors import CoopnnError
from coopnn.train.gpu.bookkeeping import MAX_STEPS_IN_FLIGHT
from coopnn.train.gpu.resident import ResidentData

# A run of steps is submitted as blocks of these many steps, the first of one step and each at most 4 times the one
# before, and none longer than BLOCK_SECONDS by the GPU time a step of the last block finished took: the losses come
# back for the progress bar, and an interrupt waits for the blocks in flight, about that often. Each submission costs
# the GPU a gap between blocks (barriers and timestamps), so blocks grow to keep those gaps a small share of a fit.
BLOCKS = (256, 64, 16, 4, 1)
BLOCK_SECONDS = 0.1
# Submissions of a run in flight at once: the host queues the next block while one runs.
LANES = 2
assert LANES * max(BLOCKS) <= MAX_STEPS_IN_FLIGHT  # the ring rows of the blocks in flight are all different
# Recordings a session keeps: runs on two data sets or batch sizes, and single steps of two batch sizes.
RECORDINGS = 4


class RecordedRuns:
    """The run and recording methods of `KernelTrainingSession` (a mixin: it uses the session's kernels, buffers and
    bookkeeping)."""

    def upload_data(self, feeds: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray]) -> ResidentData:
        """A data set on the device for `run_steps` (whole, or in shards where it does not fit)."""
        sources = {b.name: self._source(b, feeds, targets) for b in self._input_bindings()}
        return ResidentData(self.context, sources, self.kept_data)

    def run_steps(self, data: ResidentData, first_step: int, steps: int, batch_size: int, seed: int,
                  on_losses: Callable[[np.ndarray], None] | None = None) -> np.ndarray:
        """`steps` training steps on batches the device draws from `data`: batch `first_step + j` of `seed` for step
        j (`coopnn.shaders.targets.sampler`), or the whole data every step when `batch_size` is no smaller. Submitted
        as recorded blocks (`BLOCKS`), two in flight; the steps' losses, also handed to `on_losses` block by block as
        the GPU finishes them. Interrupted, it leaves `steps_run` at the steps that ran (`_settle`)."""
        if steps < 1:
            raise ValueError(f"run_steps takes 1 step or more, not {steps}")
        self.steps_run = 0
        batch = min(batch_size, data.rows)
        self._ensure_capacity(batch)
        self.books.start(first_step)
        recording = self._run_recording(data, batch, seed)
        losses, terms = np.empty(steps, np.float64), batch * self.plan.out_features
        flight: deque[tuple[int, int, int]] = deque()  # (lane, first step, steps) of each block in flight, oldest first
        gpu_ms: list[float | None] = []  # of the blocks collected

        def collect() -> float | None:
            """Wait for the oldest block in flight and take its losses; its GPU ms a step (None without timestamps)."""
            lane, first, count = flight.popleft()
            gpu_ms.append(recording.finish(lane))
            losses[first:first + count] = self.books.losses(first_step + first, count) / terms
            if on_losses is not None:
                on_losses(losses[first:first + count])
            return None if gpu_ms[-1] is None else gpu_ms[-1] / count

        try:
            done, size, step_ms = 0, 0, None
            while done < steps:
                if len(flight) == LANES:
                    step_ms = collect()
                size = _block_size(steps - done, size, step_ms)
                lane = (flight[-1][0] + 1) % LANES if flight else 0
                self.books.schedule_updates(done, size)
                recording.submit(size, lane)
                flight.append((lane, done, size))
                done += size
            while flight:
                collect()
        except BaseException:
            self._settle(recording, first_step)
            raise
        self.books.read_state()
        self.steps_run = steps
        self.last_gpu_ms = None if None in gpu_ms else sum(gpu_ms)
        self.total_gpu_ms += self.last_gpu_ms or 0.0
        return losses

    def _settle(self, recording, first_step: int) -> None:
        """After an interrupt (Ctrl-C) or a failure in a run: what was submitted runs to its end (nothing the caller
        frees next may still be in use on the GPU), and the host takes the device's counters, which count the steps
        that ran. Where the device failed they are unknown: the host's, from the run's start, go back to it with the
        next submission."""
        try:
            recording.finish_all()
            self.books.read_state()
        except CoopnnError:
            self.books.forget_device_state()
            return
        self.steps_run = self.books.drawn - first_step

    def _run_recording(self, data: ResidentData, batch: int, seed: int):
        """The recording of a step on batches drawn from `data`, made on first use. The optimizer's push constants are
        part of the key: settings changed between runs (a schedule set from `fit`'s `on_step`) are recorded anew."""
        key = (batch, seed & 0xFFFFFFFF, data.rows, tuple(b.serial for b in data.buffers.values()),
               tuple(b.serial for b in self.io.values()), self._optimizer_push(batch))
        return self._kept(key, lambda: self._record_run(data, batch, seed))

    def _kept(self, key, record):
        """The recording kept under `key`, made by `record()` when there is none; the least recently used go."""
        recording = self.recordings.pop(key, None) or record()
        self.recordings[key] = recording
        while len(self.recordings) > RECORDINGS:
            self.recordings.pop(next(iter(self.recordings))).destroy()
        return recording

    def _record_run(self, data: ResidentData, batch: int, seed: int):
        from coopnn.runtime.vk.recording import Recording

        count = self.invocations(batch)
        one_step = self._forward_backward(batch, count, data, seed) + self._update(batch)
        return Recording(self.context, one_step, uploads=self._schedule_upload(),
                         downloads=tuple(self.books.downloads()), lanes=LANES)

    def _step_recording(self, batch: int, count: int, copied: tuple[int, ...]):
        """The recording of one step on the batch in the step's inputs (`_write_batch`), kept for the next steps
        of its size, because recording a step anew was a large share of the host's time in `Trainer.step`. `copied` names
        the inputs the GPU fills."""
        from coopnn.runtime.vk.recording import Recording

        def record():
            uploads = self._schedule_upload()
            for b in self._input_bindings():
                if b.index not in copied:  # the GPU fills the others (padding samples read the first sample's row)
                    uploads[self.io[b.index]] = (0, batch * b.features * b.itemsize)
            return Recording(self.context, self._forward_backward(batch, count) + self._update(batch),
                             uploads=uploads, downloads=tuple(self.books.downloads()))

        key = ("step", batch, copied, tuple(b.serial for b in self.io.values()), self._optimizer_push(batch))
        return self._kept(key, record)


def _block_size(left: int, last: int, step_ms: float | None) -> int:
    """The size of a run's next block with `left` steps to go, after a block of `last` steps (0: none yet), a step
    of the last block finished having taken `step_ms` of GPU time (None: none timed yet; see BLOCKS)."""
    longest = 4 * last or 1
    if step_ms:
        longest = min(longest, int(BLOCK_SECONDS * 1e3 / step_ms))
    return next(size for size in BLOCKS if size <= max(1, min(left, longest)))
