"""Per-phase wall-clock breakdown of `Model.run(x)` on the coopvec backend as it stood before the host-path rework
(f16 I/O converted by numpy, single-threaded copies, serial chunks): replays `KernelExecutable.run` step by step."""

import sys
import time

import numpy as np

import coopnn
from coopnn.runtime.vk.commands import Dispatch
from coopnn.runtime.vk.memory import Placement

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
BATCHES = (1 << 10, 1 << 14, 1 << 18, 1 << 21)


def phases(model, x):
    ex = model._executable
    t = {k: 0.0 for k in ("checks", "convert_in", "write", "submit_wait", "read", "convert_out", "total")}
    start_all = time.perf_counter()
    t0 = time.perf_counter()
    feeds = model.feeds(x)
    t["checks"] += time.perf_counter() - t0
    batch = x.shape[0]
    outputs = {b.name: np.empty((batch, b.features), np.float32) for b in ex.outputs}
    for start in range(0, batch, ex.max_chunk):
        n = min(ex.max_chunk, batch - start)
        ex._ensure_capacity(n)
        for b in ex.inputs:
            t0 = time.perf_counter()
            chunk = np.ascontiguousarray(feeds[b.name][start:start + n].reshape(n, -1), dtype=b.numpy_dtype)
            t1 = time.perf_counter()
            ex.io_buffers[b.index].write(chunk.reshape(-1))
            t2 = time.perf_counter()
            t["convert_in"] += t1 - t0
            t["write"] += t2 - t1
        buffers = (ex.weights,) + tuple(ex.io_buffers[b.index] for b in ex.inputs + ex.outputs)
        groups = -(-n // ex.binary.workgroup_size[0])
        downloads = {ex.io_buffers[b.index]: (0, n * b.features * b.itemsize) for b in ex.outputs
                     if ex.io_buffers[b.index].placement is Placement.STAGED}
        t0 = time.perf_counter()
        ex.context.run([Dispatch(ex.kernel, buffers, np.uint32([n]), groups)], downloads)
        t["submit_wait"] += time.perf_counter() - t0
        for b in ex.outputs:
            t0 = time.perf_counter()
            raw = ex.io_buffers[b.index].read(b.numpy_dtype, n * b.features)
            t1 = time.perf_counter()
            outputs[b.name][start:start + n] = raw.reshape(n, b.features)
            t["convert_out"] += time.perf_counter() - t1
            t["read"] += t1 - t0
    t["total"] = time.perf_counter() - start_all
    return t


def main():
    rows = []
    for name in MODELS:
        model = coopnn.load(f"models/{name}.onnx", backend="coopvec", weights="fp16")
        for batch in BATCHES:
            x = np.random.rand(batch, model.inputs[0].shape[1]).astype(np.float32)
            for _ in range(2):
                model.run(x)
            runs = [phases(model, x) for _ in range(5 if batch >= 1 << 21 else 15)]
            med = {k: float(np.median([r[k] for r in runs])) * 1e3 for k in runs[0]}
            wall = []
            for _ in range(5):
                t0 = time.perf_counter()
                model.run(x)
                wall.append(time.perf_counter() - t0)
            med["run"] = float(np.median(wall)) * 1e3
            med["gpu"] = model.last_gpu_ms
            rows.append((name, batch, med))
            print(name, batch, {k: round(v, 4) for k, v in med.items()}, flush=True)
        model.close()
    print("| model | batch | run() | checks | f32->f16 | write mapped | submit+wait | read | f16->f32 | GPU |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, batch, m in rows:
        print(f"| {name} | 2^{batch.bit_length() - 1} | {m['run']:.3f} | {m['checks']:.3f} | {m['convert_in']:.3f} | "
              f"{m['write']:.3f} | {m['submit_wait']:.3f} | {m['read']:.3f} | {m['convert_out']:.3f} | {m['gpu']:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
