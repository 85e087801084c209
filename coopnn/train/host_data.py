"""A training data set kept on the host, for sessions that train there (the numpy backend): `run_steps` indexes the
arrays with the same sampler the devices draw with (`coopnn.shaders.targets.sampler`), so a seed gives the same
batches on every backend."""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from coopnn.shaders.targets.sampler import sample_rows


class HostData:
    """Feeds and targets (name -> array of rows) as `Trainer.fit` hands them to a session."""

    def __init__(self, feeds: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray]):
        self.feeds, self.targets = dict(feeds), dict(targets)
        self.rows = len(next(iter(self.targets.values())))
        self.shards = [(0, self.rows)]

    def select(self, shard: int) -> None:
        """The whole data set is one shard."""

    def close(self) -> None:
        self.feeds, self.targets = {}, {}


def host_steps(session, data: HostData, first_step: int, steps: int, batch_size: int, seed: int,
               on_losses: Callable[[np.ndarray], None] | None = None) -> np.ndarray:
    """`steps` calls of `session.step` on the batches the sampler draws for steps `first_step`.. of `seed`; each
    step's loss also handed to `on_losses` as it comes, and `session.steps_run` counting the steps done."""
    whole = batch_size >= data.rows
    losses = np.empty(steps, np.float64)
    session.steps_run = 0
    for j in range(steps):
        rows = sample_rows(seed, first_step + j, data.rows if whole else batch_size, data.rows, whole)
        losses[j] = session.step({k: v[rows] for k, v in data.feeds.items()},
                                 {k: v[rows] for k, v in data.targets.items()})
        session.steps_run = j + 1
        if on_losses is not None:
            on_losses(losses[j:j + 1])
    return losses
