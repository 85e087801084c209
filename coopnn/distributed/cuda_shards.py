"""Sharded inference on PyTorch CUDA tensors: each shard copied by CUDA to the GPU of its model (peer to peer, no
host round trip; no copy where it is there already), run there, and the outputs gathered on the input's GPU."""

from __future__ import annotations

from typing import Any, Mapping

from coopnn.distributed.batch_shards import joined, shard_of
from coopnn.errors import InputError


def _cuda_ordinal(model) -> int:
    """The CUDA device of the Vulkan device `model` runs on (matched by UUID)."""
    from coopnn.interop.cuda_driver import cuda_driver
    from coopnn.runtime.vk.shared import chosen_device

    info = chosen_device(model.device)
    ordinal = cuda_driver().ordinal_of_uuid(info.device_uuid)
    if ordinal is None:
        raise InputError(f"CUDA does not see {info.name}, a device of the ShardedModel; pass numpy arrays or check "
                         f"CUDA_VISIBLE_DEVICES")
    return ordinal


def run_cuda_shards(pool, jobs: list, named: Mapping[str, Any], x: Any) -> Any:
    """The outputs of `jobs` ((model, start, stop) each) on the CUDA tensors `named`, on the first input's device."""
    import torch

    if not all(isinstance(v, torch.Tensor) for v in named.values()):
        raise InputError("a ShardedModel takes CUDA arrays as PyTorch tensors; pass torch tensors or numpy arrays")
    home = next(iter(named.values())).device

    def run(job):
        model, start, stop = job
        device = torch.device("cuda", _cuda_ordinal(model))
        part = shard_of(named, x, start, stop)
        moved = ({k: v.to(device) for k, v in part.items()} if isinstance(part, Mapping) else part.to(device))
        return model.run(moved)

    parts = list(pool.map(run, jobs))
    return joined(parts, lambda arrays: torch.cat([a.to(home) for a in arrays]))
