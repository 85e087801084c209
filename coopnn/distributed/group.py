"""The collective operations data-parallel training needs, and `TorchGroup`, which runs them through
`torch.distributed` (NCCL or gloo) in a `torchrun`-launched process.

`ProcessGroup` is what the rest of `coopnn.distributed` calls: sums and maxima of float32 host arrays across ranks,
a broadcast from one rank, a barrier. A test's in-process group of threads implements the same methods.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from coopnn.errors import InputError


class ProcessGroup(Protocol):
    rank: int
    world_size: int

    def all_reduce_sum(self, values: np.ndarray) -> np.ndarray:
        """The element-wise sum of every rank's `values` (same shape and dtype on every rank), on every rank."""

    def all_reduce_max(self, values: np.ndarray) -> np.ndarray:
        """The element-wise maximum of every rank's `values`, on every rank."""

    def broadcast(self, values: np.ndarray, source: int) -> np.ndarray:
        """Rank `source`'s `values` on every rank (the others pass an array of the same shape and dtype)."""

    def barrier(self) -> None:
        """Return once every rank has called it."""


class TorchGroup:
    """A `torch.distributed` process group (the default one unless `group` is given), initialised by the caller
    (`torch.distributed.init_process_group` in a `torchrun` process). With NCCL the host arrays go through the
    rank's CUDA device; `all_reduce_sum_cuda` sums CUDA tensors in place, as the GPU training sessions' gradients."""

    def __init__(self, group: Any = None):
        import torch
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise InputError("TorchGroup needs torch.distributed initialised: call "
                             "torch.distributed.init_process_group() in each process torchrun starts")
        self._torch, self._dist, self.group = torch, dist, group
        self.rank, self.world_size = dist.get_rank(group), dist.get_world_size(group)
        self.backend = str(dist.get_backend(group))
        on_cuda = self.backend == "nccl"
        self._device = torch.device("cuda", torch.cuda.current_device()) if on_cuda else torch.device("cpu")

    def _reduce(self, values: np.ndarray, op) -> np.ndarray:
        tensor = self._torch.from_numpy(np.ascontiguousarray(values)).to(self._device)
        self._dist.all_reduce(tensor, op=op, group=self.group)
        return tensor.cpu().numpy()

    def all_reduce_sum(self, values: np.ndarray) -> np.ndarray:
        return self._reduce(values, self._dist.ReduceOp.SUM)

    def all_reduce_max(self, values: np.ndarray) -> np.ndarray:
        return self._reduce(values, self._dist.ReduceOp.MAX)

    def all_reduce_sum_cuda(self, tensor) -> None:
        """Sum the CUDA tensor `tensor` across ranks in place, on the current stream."""
        self._dist.all_reduce(tensor, op=self._dist.ReduceOp.SUM, group=self.group)

    def broadcast(self, values: np.ndarray, source: int) -> np.ndarray:
        tensor = self._torch.from_numpy(np.ascontiguousarray(values).copy()).to(self._device)
        self._dist.broadcast(tensor, src=source, group=self.group)
        return tensor.cpu().numpy()

    def barrier(self) -> None:
        self._dist.barrier(group=self.group)


def agreed_overflow(group: ProcessGroup, overflowed: bool) -> bool:
    """Whether any rank's gradient overflowed this step: every rank then skips it, so weights and loss scales stay
    the same on all of them."""
    return bool(group.all_reduce_max(np.array([1.0 if overflowed else 0.0], np.float32))[0] > 0)


def mean_over_ranks(group: ProcessGroup, value: float) -> float:
    """The mean of every rank's `value` (a step's loss: the loss of the batches of all ranks together)."""
    return float(group.all_reduce_sum(np.array([value], np.float64))[0]) / group.world_size
