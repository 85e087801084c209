"""Weak-scaling benchmark of data-parallel training (`coopnn.distributed.DataParallelTrainer`) and of sharded
inference (`coopnn.distributed.ShardedModel`) on the GPUs of one host.

Training: one process per GPU under torchrun, each training the benchmark MLPs at 2^18 samples a GPU a step; rank 0
writes `<out>/<device>-<date>-distributed-<N>gpu.json` (ms a step, and of it the ms of the gradient's all-reduce and
hand-off between Vulkan and CUDA). Run it once per GPU count, then `--report` joins the files into a table of
weak-scaling efficiency (the 1-GPU step time over the N-GPU step time; the target is 90%):

    torchrun --standalone --nproc_per_node=1 bench/distributed.py --out DIR
    torchrun --standalone --nproc_per_node=2 bench/distributed.py --out DIR     # and 4, 8 where the host has them
    python3 bench/distributed.py --sharded --out DIR    # sharded inference at 2^24 samples on 1..N GPUs
    python3 bench/distributed.py --report --out DIR     # DIR/<device>-<date>-distributed.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

import coopnn  # noqa: E402
from coopnn.bench.environment import describe_environment, results_stem  # noqa: E402
from coopnn.tables import format_table  # noqa: E402

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
RESULTS = ROOT / "bench" / "results"
DATA_ROWS = 1 << 20  # samples of each rank's data set, drawn from at 2^18 a step


def _timed_reduce(transport, spent: list[float]) -> None:
    """Count the seconds of every gradient all-reduce (the hand-off to CUDA and back included)."""
    reduce = transport.reduce

    def timed(buffer, count):
        started = time.perf_counter()
        reduce(buffer, count)
        spent.append(time.perf_counter() - started)

    transport.reduce = timed


def train_rank(model_name: str, args, group) -> dict:
    from coopnn.distributed import DataParallelTrainer
    from coopnn.distributed.devices import vulkan_device_of_cuda

    device = vulkan_device_of_cuda(int(os.environ.get("LOCAL_RANK", "0")))
    model = coopnn.load(ROOT / "models" / f"{model_name}.onnx", backend=args.backend, device=device)
    rng = np.random.default_rng(group.rank)
    x = rng.uniform(-1, 1, (DATA_ROWS, model.inputs[0].shape[1])).astype(np.float32)
    y = rng.uniform(-1, 1, (DATA_ROWS, model.outputs[0].shape[1])).astype(np.float32)
    with DataParallelTrainer(coopnn.Trainer(model), group) as parallel:
        spent: list[float] = []
        _timed_reduce(parallel.steps.transport, spent)
        parallel.fit(x, y, steps=args.warmup_steps, batch_size=args.batch, progress=False)
        spent.clear()
        group.barrier()
        started = time.perf_counter()
        parallel.fit(x, y, steps=args.steps, batch_size=args.batch, progress=False)
        elapsed = time.perf_counter() - started
        transport = type(parallel.steps.transport).__name__
    model.close()
    return {"model": model_name, "world_size": group.world_size, "batch_per_gpu": args.batch,
            "step_ms": 1e3 * elapsed / args.steps, "reduce_ms": 1e3 * float(np.mean(spent)), "transport": transport}


def train(args) -> None:
    import torch
    import torch.distributed as dist

    from coopnn.distributed import TorchGroup

    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    try:
        group = TorchGroup()
        rows = [train_rank(m, args, group) for m in args.models.split(",")]
        if group.rank == 0:
            environment = describe_environment()
            path = args.out / f"{results_stem(environment)}-distributed-{group.world_size}gpu.json"
            path.write_text(json.dumps({"environment": environment, "training": rows}, indent=2))
            print(format_table(["model", "GPUs", "ms/step", "all-reduce ms", "transport"],
                               [[r["model"], str(r["world_size"]), f"{r['step_ms']:.3f}", f"{r['reduce_ms']:.3f}",
                                 r["transport"]] for r in rows]))
    finally:
        dist.destroy_process_group()


def sharded(args) -> None:
    from coopnn.distributed import ShardedModel
    from coopnn.distributed.devices import all_devices

    devices, rows = all_devices(), []
    for model_name in args.models.split(","):
        path = ROOT / "models" / f"{model_name}.onnx"
        for count in sorted({1, 2, 4, 8, len(devices)} & set(range(1, len(devices) + 1))):
            with ShardedModel.load(path, devices=devices[:count], backend=args.backend) as model:
                x = np.random.default_rng(0).uniform(-1, 1, (args.samples, model.inputs[0].shape[1]))
                x = x.astype(np.float32)
                model.run(x[:4096])
                started = time.perf_counter()
                model.run(x)
                rows.append({"model": model_name, "devices": count, "samples": args.samples,
                             "ms": 1e3 * (time.perf_counter() - started)})
    environment = describe_environment()
    (args.out / f"{results_stem(environment)}-distributed-sharded.json").write_text(
        json.dumps({"environment": environment, "sharded": rows}, indent=2))
    print(format_table(["model", "devices", "samples", "ms"],
                       [[r["model"], str(r["devices"]), str(r["samples"]), f"{r['ms']:.1f}"] for r in rows]))


def report(args) -> None:
    runs = {}
    for path in sorted(args.out.glob("*-distributed-*gpu.json")):
        for row in json.loads(path.read_text())["training"]:
            runs[(row["model"], row["world_size"])] = row
    table = []
    for (model, gpus), row in sorted(runs.items()):
        one = runs.get((model, 1))
        efficiency = f"{100 * one['step_ms'] / row['step_ms']:.0f}%" if one else "(no 1-GPU run)"
        table.append([model, str(gpus), f"{row['step_ms']:.3f}", f"{row['reduce_ms']:.3f}", efficiency])
    text = format_table(["model", "GPUs", "ms/step", "all-reduce ms", "weak-scaling efficiency"], table,
                        markdown=True)
    (args.out / f"{results_stem(describe_environment())}-distributed.md").write_text(text + "\n")
    print(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--backend", default="coopvec")
    p.add_argument("--batch", type=int, default=1 << 18, help="samples a GPU a step")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--sharded", action="store_true", help="sharded inference instead of training")
    p.add_argument("--samples", type=int, default=1 << 24, help="samples of the sharded-inference batch")
    p.add_argument("--report", action="store_true", help="join the training results in --out into a table")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    (report if args.report else sharded if args.sharded else train)(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
