"""`DataParallelTrainer`: a `coopnn.Trainer` in each process of a group, trained as one.

Every rank starts from rank 0's parameters, draws its own batches (the trainer's seed keyed by the rank:
`coopnn.distributed.sampling`), and takes the same optimizer step: the mean over ranks of the ranks' gradients,
skipped on every rank where any rank's gradient overflowed. With the same seeds, N ranks at batch B take the steps
one process takes on the N batches together (batch N x B). Checkpoints are written by rank 0 alone and are ordinary
single-process checkpoints.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from coopnn.distributed.group import ProcessGroup, mean_over_ranks
from coopnn.distributed.sampling import rank_seed
from coopnn.errors import InputError
from coopnn.progress import Progress
from coopnn.trainer import Trainer


class DataParallelTrainer:
    """Trains `trainer` (made the same way on every rank) together with the other ranks of `group` (a
    `TorchGroup` in a `torchrun` process, or any `ProcessGroup`). `trainer.steps` counts the steps of the group."""

    def __init__(self, trainer: Trainer, group: ProcessGroup):
        if group.world_size < 1 or not 0 <= group.rank < group.world_size:
            raise InputError(f"rank {group.rank} of a group of {group.world_size}: ranks run from 0 to world size - 1")
        self.trainer, self.group = trainer, group
        self.steps = _reduced_steps(trainer.session, group)
        self._start_from_rank_0()

    @property
    def rank(self) -> int:
        return self.group.rank

    @property
    def seed(self) -> int:
        """The sampler seed of this rank's batches."""
        return rank_seed(self.trainer.seed, self.group.rank)

    def _start_from_rank_0(self) -> None:
        """Every rank takes rank 0's parameters, so that equal steps keep them equal."""
        session = self.trainer.session
        values = session.parameters()
        session.load_parameters({name: self.group.broadcast(np.asarray(values[name], np.float32), 0)
                                 for name in sorted(values)})
        self.trainer.model.take_trained(session)

    def fit(self, x: Any, y: Any, *, steps: int, batch_size: int = 4096, progress: bool = True) -> np.ndarray:
        """`steps` steps of the group, each on `batch_size` samples a rank drawn from this rank's (x, y) (the same
        data on every rank, or each rank's share of it); the mean loss over ranks of every step. The progress bar
        shows on rank 0."""
        if steps < 0 or batch_size < 1:
            raise InputError(f"fit needs steps >= 0 and batch_size >= 1, not {steps} and {batch_size}")
        feeds, targets = self.trainer._data(x, y)
        losses = np.empty(steps, np.float64)
        bar = Progress(steps, label=f"fit x{self.group.world_size}") if progress and self.rank == 0 else None
        data = self.steps.upload(feeds, targets)
        try:
            for j in range(steps):
                loss = self.steps.step(data, self.trainer.steps, batch_size, self.seed)
                losses[j] = mean_over_ranks(self.group, loss)
                self.trainer.steps += 1
                if bar is not None:
                    bar.advance(detail=f"loss {losses[j]:.4g}")
        finally:
            data.close()
            if bar is not None:
                bar.close()
            self.trainer.model.take_trained(self.trainer.session)
        return losses

    def save_checkpoint(self, path: str | os.PathLike) -> None:
        """Rank 0 writes the checkpoint (every rank holds the same state); every rank returns once it is written."""
        if self.rank == 0:
            self.trainer.save_checkpoint(path)
        self.group.barrier()

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        """Every rank restores the checkpoint (from a single-process or a data-parallel run alike)."""
        self.trainer.load_checkpoint(path)

    def close(self) -> None:
        """Free what the data-parallel steps hold, then the trainer (`Trainer.close`)."""
        try:
            self.steps.close()
        finally:
            self.trainer.close()

    def __enter__(self) -> "DataParallelTrainer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _reduced_steps(session, group: ProcessGroup):
    """The data-parallel steps for the session's kind: on the host, or on a Vulkan device sharing memory with CUDA."""
    if hasattr(session, "loss_and_gradients"):
        from coopnn.distributed.host_steps import HostReducedSteps

        return HostReducedSteps(session, group)
    if hasattr(session, "gradient_commands"):
        from coopnn.distributed.kernel_steps import KernelReducedSteps

        return KernelReducedSteps(session, group)
    raise InputError(f"data-parallel training needs the numpy backend or a Vulkan training backend, not "
                     f"{type(session).__name__}")
