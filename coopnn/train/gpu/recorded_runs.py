"""`RecordedRuns`: how a `KernelTrainingSession` submits steps, recorded once and submitted again.

`run_steps` runs up to MAX_STEPS_PER_RUN steps on a data set already on the device (`upload_data`), as blocks of
`BLOCKS` steps, each block a recording made on first use and kept (`RECORDINGS` of them, least recently used out), so
a long fit records a few blocks and submits them over and over; `_step_recording` keeps the recording of a single
`Trainer.step` the same way. What a step dispatches is the session's (`_forward_backward`, `_update`).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from coopnn.train.gpu.bookkeeping import MAX_STEPS_PER_RUN
from coopnn.train.gpu.resident import ResidentData

# A run of steps is submitted as blocks of these many steps, each block recorded once and submitted again: recording
# costs the host about 0.15 ms a step in Python, so a 1,000-step fit recording all its runs anew spent 0.29 ms a step
# beside 0.50 ms of GPU work (mlp_3_64x2_3 at 2^18 on the H100, 2026-11-25); blocks keep that to a few recordings, and
# a block records its step once, executed as often as it has steps (`Recording`'s `repeat`). Each size is recorded
# twice and the copies alternate, so the next block is queued while one runs.
BLOCKS = (16, 4, 1)
COPIES = 2
# Recorded blocks a session keeps: every copy of every size for two data sets or batch sizes. A run records its blocks
# as it submits them, so it may evict while its own are in flight; it uses at most COPIES * len(BLOCKS) keys, half of
# this, so the least recently used keys evicted are never its own.
RECORDINGS = 2 * COPIES * len(BLOCKS)


class RecordedRuns:
    """The run and recording methods of `KernelTrainingSession` (a mixin: it uses the session's kernels, buffers and
    bookkeeping)."""

    def upload_data(self, feeds: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray]) -> ResidentData:
        """A data set on the device for `run_steps` (whole, or in shards where it does not fit)."""
        sources = {b.name: self._source(b, feeds, targets) for b in self._input_bindings()}
        return ResidentData(self.context, sources)

    def run_steps(self, data: ResidentData, first_step: int, steps: int, batch_size: int, seed: int) -> np.ndarray:
        """`steps` training steps (at most MAX_STEPS_PER_RUN) on batches the device draws from `data`: batch
        `first_step + j` of `seed` for step j (`coopnn.shaders.targets.sampler`), or the whole data every step
        when `batch_size` is no smaller. Submitted as recorded blocks (`BLOCKS`), read back once; the steps' losses."""
        if not 0 < steps <= MAX_STEPS_PER_RUN:
            raise ValueError(f"run_steps takes 1 to {MAX_STEPS_PER_RUN} steps, not {steps}")
        batch = min(batch_size, data.rows)
        self._ensure_capacity(batch)
        blocks, left = [], steps
        for size in BLOCKS:
            blocks += [(size, copy % COPIES) for copy in range(left // size)]
            left %= size
        self.books.before(steps, first_step)
        gpu_ms, recordings = [], []
        try:
            for size, copy in blocks:
                # Recorded on first use, while the blocks submitted before it run: a fit's first runs record every
                # block, 7.5 ms each on the H200 machine's host (45 ms of a 330 ms fit of 1,000 steps, 2026-11-27).
                recording = self._block(data, size, copy, batch, seed)
                recordings.append(recording)
                if recording.in_flight:
                    gpu_ms.append(recording.finish())
                recording.submit()
        except BaseException:
            # An interrupt (Ctrl-C) or a failure: the steps that ran changed the weights, but the host's counters
            # (and the trainer's) stay where the run began, so the next submission puts them back on the device.
            self.books.forget_device_state()
            raise
        finally:
            # Nothing the caller frees next may still be in use on the GPU.
            gpu_ms += [recording.finish() for recording in dict.fromkeys(recordings) if recording.in_flight]
        self.last_gpu_ms = None if None in gpu_ms else sum(gpu_ms)
        return self._mean_losses(steps, batch)

    def _block(self, data: ResidentData, steps: int, copy: int, batch: int, seed: int):
        """Copy `copy` of the recording of `steps` steps, made on first use. The optimizer's push constants are part
        of the key: settings changed between runs (a schedule set from `fit`'s `on_step`) are recorded anew."""
        key = (steps, copy, batch, seed & 0xFFFFFFFF, data.rows,
               tuple(b.serial for b in data.buffers.values()), tuple(b.serial for b in self.io.values()),
               self._optimizer_push(batch))
        return self._kept(key, lambda: self._record_block(data, steps, batch, seed))

    def _kept(self, key, record):
        """The recording kept under `key`, made by `record()` when there is none; the least recently used go."""
        recording = self.recordings.pop(key, None) or record()
        self.recordings[key] = recording
        while len(self.recordings) > RECORDINGS:
            self.recordings.pop(next(iter(self.recordings))).destroy()
        return recording

    def _record_block(self, data: ResidentData, steps: int, batch: int, seed: int):
        from coopnn.runtime.vk.recording import Recording

        count = -(-batch // self.granularity) * self.granularity
        one_step = self._forward_backward(batch, count, data, seed) + self._update(batch)
        return Recording(self.context, one_step, uploads=self._schedule_upload(),
                         downloads=tuple(self.books.downloads()), repeat=steps)

    def _step_recording(self, batch: int, count: int, copied: tuple[int, ...]):
        """The recording of one step on the batch in the step's inputs (`_write_batch`), kept for the next steps
        of its size: recording a step anew cost the host about 0.4 ms of a 1.0 ms `Trainer.step` on the H100
        (mlp_3_64x2_3, 2^16 samples, 0.14 ms of GPU work; 2026-11-27). `copied` names the inputs the GPU fills."""
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
