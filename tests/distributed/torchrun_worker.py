"""One rank of `test_torchrun.py`'s run: data-parallel training of the coopvec trainer on this rank's GPU under an
NCCL group; rank 0 then trains one single-GPU trainer on the ranks' batches together and writes, as JSON to the file
named by argv[1], the largest differences of the losses and the parameters."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import coopnn  # noqa: E402
from coopnn.distributed import DataParallelTrainer, TorchGroup, rank_seed  # noqa: E402
from coopnn.distributed.devices import vulkan_device_of_cuda  # noqa: E402
from coopnn.shaders.targets.sampler import sample_rows  # noqa: E402

BATCH, STEPS, SEED = 4096, 10, 11


def trainer(device: int) -> coopnn.Trainer:
    model = coopnn.mlp(3, [64, 64], 4, seed=2, backend="coopvec", weights="fp16", device=device)
    return coopnn.Trainer(model, optimizer=coopnn.optim.Adam(lr=1e-2), seed=SEED)


def main() -> None:
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    group, device = TorchGroup(), vulkan_device_of_cuda(local_rank)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1 << 16, 3)).astype(np.float32)
    y = np.stack([np.sin(3 * x[:, 0]), x[:, 1] * x[:, 2], x[:, 0], np.cos(x[:, 1])], axis=1).astype(np.float32)
    with DataParallelTrainer(trainer(device), group) as parallel:
        losses = parallel.fit(x, y, steps=STEPS, batch_size=BATCH, progress=False)
        parameters = parallel.trainer.session.parameters()
    if group.rank == 0:
        with trainer(device) as single:
            expected = []
            for step in range(STEPS):
                rows = np.concatenate([sample_rows(rank_seed(SEED, r), step, BATCH, len(x))
                                       for r in range(group.world_size)])
                expected.append(single.step(x[rows], y[rows]))
            wanted = single.session.parameters()
        relative = {name: float(np.max(np.abs(parameters[name] - v) / (np.abs(v) + 1e-3)))
                    for name, v in wanted.items()}
        Path(sys.argv[1]).write_text(json.dumps({
            "world_size": group.world_size, "losses": losses.tolist(), "expected": expected,
            "parameter_difference": relative}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
