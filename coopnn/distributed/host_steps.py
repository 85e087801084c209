"""Data-parallel steps of a session that trains on the host (the numpy backend): each rank's gradient of its own
batch, averaged across ranks, then the optimizer on every rank alike."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from coopnn.distributed.group import ProcessGroup, agreed_overflow
from coopnn.shaders.targets.sampler import sample_rows
from coopnn.train.host_data import HostData


class HostReducedSteps:
    """Averaged steps of `session` (one with `loss_and_gradients`, `optimizer` and `master`) across `group`."""

    def __init__(self, session, group: ProcessGroup):
        self.session, self.group = session, group
        self.skipped = 0  # steps skipped on every rank because a rank's gradient overflowed

    def upload(self, feeds: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray]) -> HostData:
        return HostData(feeds, targets)

    def step(self, data: HostData, step: int, batch_size: int, seed: int) -> float:
        """One step on batch `step` of `seed` from `data`: this rank's loss of it (before the update)."""
        whole = batch_size >= data.rows
        rows = sample_rows(seed, step, data.rows if whole else batch_size, data.rows, whole)
        loss, gradients = self.session.loss_and_gradients({k: v[rows] for k, v in data.feeds.items()},
                                                          {k: v[rows] for k, v in data.targets.items()})
        averaged = self.average(gradients)
        if averaged is None:
            self.skipped += 1
        else:
            self.session.optimizer.update(self.session.master, averaged)
        return loss

    def average(self, gradients: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
        """The mean over ranks of each rank's `gradients`, in one all-reduce of them flattened; None where any
        rank's is not finite (the step is then skipped everywhere)."""
        names = sorted(gradients)
        flat = np.concatenate([np.asarray(gradients[n], np.float32).ravel() for n in names])
        if agreed_overflow(self.group, not bool(np.isfinite(flat).all())):
            return None
        flat = self.group.all_reduce_sum(flat) / np.float32(self.group.world_size)
        averaged, start = {}, 0
        for name in names:
            shape = np.shape(gradients[name])
            size = int(np.prod(shape))
            averaged[name] = flat[start:start + size].reshape(shape)
            start += size
        return averaged

    def close(self) -> None:
        """Nothing is held beyond the session's own memory."""
