"""Whole-step GPU time of the coopvec training session's step kernels ("coopvec" per-sample, "tiled" cooperative
matrices) on the benchmark MLPs (L2 + Adam), with the step kernel alone (a loss-only submission) beside it.

    python3 bench/step_kernels.py [--batches 16,18] [--steps 10] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import coopnn  # noqa: E402
from coopnn.backends.coopvec.training import CoopvecTrainingSession  # noqa: E402
from coopnn.train.losses import get_loss  # noqa: E402
from coopnn.train.optim import Adam  # noqa: E402

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batches", default="16,18")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--methods", default="coopvec,tiled")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    lines = ["| model | batch | step | gradients | ms/step | M samples/s | step kernel ms |", "|---|---|---|---|---|---|---|"]
    for model in MODELS:
        graph = coopnn.load(ROOT / "models" / f"{model}.onnx", backend="numpy").graph
        rng = np.random.default_rng(0)
        for exponent in map(int, args.batches.split(",")):
            batch = 1 << exponent
            x = rng.uniform(-1, 1, (batch, graph.inputs[0].shape[1])).astype(np.float32)
            y = rng.uniform(0, 1, (batch, graph.outputs[0].shape[1])).astype(np.float32)
            feeds, targets = {graph.inputs[0].name: x}, {graph.outputs[0].name: y}
            for method in args.methods.split(","):
                session = CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None, step=method)
                try:
                    times, kernel = [], []
                    for i in range(args.steps + 3):
                        session.step(feeds, targets)
                        times.append(session.last_gpu_ms)
                        session.loss(feeds, targets)
                        kernel.append(session.last_gpu_ms)
                    ms, k = statistics.median(times[3:]), statistics.median(kernel[3:])
                    lines.append(f"| {model} | 2^{exponent} | {session.step_method} | {session.gradient_method} | "
                                 f"{ms:.3f} | {batch / ms / 1e3:.0f} | {k:.3f} |")
                finally:
                    session.close()
                print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
