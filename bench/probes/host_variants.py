"""Probe: where the output buffers of the host path should live, and what the fence spin buys, on the GPU machine.

Times `Model.run(x)` (median wall-clock) for the benchmark MLPs with outputs STAGED (device-local, copied into
host-cached memory by the GPU) against HOST (the shader writes host-cached memory across the bus), with and without
polling the fence before sleeping, and prints the host path's phases for each.
"""

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import coopnn  # noqa: E402
from coopnn.runtime.vk import lane  # noqa: E402
from coopnn.runtime.vk.memory import Placement  # noqa: E402

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")


def measure(name, batch, placement, spin):
    lane.SPIN_SECONDS = spin
    model = coopnn.load(f"models/{name}.onnx", weights="fp16")
    model._executable.output_placement = placement
    x = np.random.default_rng(0).uniform(-1, 1, (batch, model.inputs[0].shape[1])).astype(np.float32)
    out = np.empty((batch, model.outputs[0].shape[1]), np.float32)
    runs = 7 if batch >= 1 << 20 else 200
    for _ in range(3):
        model.run(x, out=out)
    walls, timings = [], []
    for _ in range(runs):
        start = time.perf_counter()
        model.run(x, out=out)
        walls.append(time.perf_counter() - start)
        timings.append(model._executable.last_timing)
    model.close()
    med = lambda key: statistics.median(getattr(t, key) for t in timings)  # noqa: E731
    return (statistics.median(walls) * 1e3, med("copy_in_ms"), med("submit_ms"), med("wait_ms"), med("copy_out_ms"),
            med("total_ms"), med("gpu_ms"))


def main():
    print("| model | batch | outputs | spin | run(x, out=y) ms | copy in | submit | wait | copy out | host path | GPU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in MODELS:
        for log2 in (10, 14, 21):
            for placement in (Placement.STAGED, Placement.HOST):
                for spin in ((200e-6, 0.0) if log2 == 10 else (200e-6,)):
                    r = measure(name, 1 << log2, placement, spin)
                    print(f"| {name} | 2^{log2} | {placement.name} | {spin * 1e6:.0f} µs | " +
                          " | ".join(f"{v:.4f}" for v in r) + " |", flush=True)


if __name__ == "__main__":
    main()
