"""End-to-end `Model.run` against PyTorch, and the copy floor: where a user's time goes (bench/host_path.py and
bench/run.py run it).

For each model and batch: coopnn's wall-clock time from numpy in/out (`run(x)`), into a preallocated output
(`run(x, out=y)`), on coopnn device arrays (float32 and float16) and from PyTorch CUDA tensors (float32 and half,
where torch and CUDA are there), with the per-phase split of the host
path (`last_timing`); PyTorch fp16 under a CUDA graph from numpy, from pinned memory and GPU-resident; and the copy
floor: the same input and output bytes written into mapped device memory and read from host-cached memory with the
same threads, through the same Vulkan memory. Then the throughput of one model shared by 1, 2, 4 and 8 threads.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path

import numpy as np

import coopnn
from coopnn.bench.environment import describe_environment
from coopnn.bench.models import BenchModel
from coopnn.bench.report import write_results
from coopnn.errors import CoopnnError

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
THREAD_COUNTS = (1, 2, 4, 8)
THREAD_BATCH = 1 << 14
THREAD_CALLS = 200


def median_ms(fn, runs: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def runs_for(batch: int) -> int:
    return 7 if batch >= 1 << 20 else 25 if batch > 1 << 14 else 200


def coopnn_rows(model, x: np.ndarray, runs: int) -> dict:
    out = np.empty((x.shape[0], model.outputs[0].shape[1]), np.float32)
    device_x = coopnn.to_device(x)
    row = {"run_ms": median_ms(lambda: model.run(x), runs),
           "out_ms": median_ms(lambda: model.run(x, out=out), runs),
           "device_ms": median_ms(lambda: model.run(device_x), runs)}
    half_x = coopnn.to_device(x, dtype="float16")
    try:
        row["device_f16_ms"] = median_ms(lambda: model.run(half_x), runs)
    except coopnn.InputError as exc:  # a backend without a float16-I/O kernel
        row.update(device_f16_ms=None, device_f16_reason=str(exc))
    timings = []
    for _ in range(runs):
        model.run(x)
        timings.append(model._executable.last_timing)
    for phase in ("copy_in_ms", "submit_ms", "wait_ms", "copy_out_ms", "gpu_ms", "total_ms"):
        row[phase] = statistics.median(getattr(t, phase) for t in timings)
    row["chunks"] = timings[-1].chunks
    return row


def cuda_tensor_row(model, x: np.ndarray, runs: int) -> dict:
    try:
        import torch
        from coopnn.interop.tensors import is_cuda_array  # noqa: F401
    except ImportError as exc:
        return {"cuda_ms": None, "cuda_reason": str(exc)}
    row = {}
    for key, t in (("cuda_ms", torch.from_numpy(x).cuda()), ("cuda_f16_ms", torch.from_numpy(x).cuda().half())):
        def call(t=t):
            model.run(t)
            torch.cuda.synchronize()

        try:
            row[key] = median_ms(call, runs)
        except coopnn.CoopnnError as exc:
            row.update({key: None, key.replace("_ms", "_reason"): str(exc)})
    return row


def torch_rows(bench_model: BenchModel, x: np.ndarray, runs: int) -> dict:
    import torch

    from coopnn.bench.torch_runners import TorchCudaGraphRunner

    runner = TorchCudaGraphRunner(bench_model)
    name = bench_model.graph.inputs[0].name
    runner.run({name: x})  # capture
    static_in = runner.static_inputs[name]
    static_out = next(iter(runner.static_outputs.values()))
    pinned_in = torch.from_numpy(x).pin_memory()
    pinned_out = torch.empty(static_out.shape, dtype=static_out.dtype).pin_memory()

    def from_numpy():
        static_in.copy_(torch.from_numpy(x))
        runner.cuda_graph.replay()
        static_out.cpu().numpy()

    def from_pinned():
        static_in.copy_(pinned_in, non_blocking=True)
        runner.cuda_graph.replay()
        pinned_out.copy_(static_out, non_blocking=True)
        torch.cuda.synchronize()

    def resident():
        runner.cuda_graph.replay()
        torch.cuda.synchronize()

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gpu = []
    for _ in range(runs):
        start.record()
        runner.cuda_graph.replay()
        end.record()
        end.synchronize()
        gpu.append(start.elapsed_time(end))
    row = {"torch_numpy_ms": median_ms(from_numpy, runs), "torch_pinned_ms": median_ms(from_pinned, runs),
           "torch_resident_ms": median_ms(resident, runs), "torch_gpu_ms": statistics.median(gpu)}
    runner.close()
    return row


def copy_floor(model, x: np.ndarray, runs: int) -> dict:
    """Threaded copies of the input into mapped device-writable memory and of the output out of host-readable memory,
    through buffers placed as the host path places them."""
    from coopnn.runtime.copies import copy_rows
    from coopnn.runtime.vk.memory import HostAccess

    executable = model._executable
    context = executable.context
    features_out = executable.outputs[0].features
    rows = x.shape[0]
    source = context.create_buffer(x.shape[0] * x.shape[1] * 4, HostAccess.WRITE)
    sink = context.create_buffer(rows * features_out * 4, HostAccess.READ)
    try:
        into = source.mapped(np.float32, x.size).reshape(x.shape)
        out_of = sink.mapped(np.float32, rows * features_out).reshape(rows, features_out)
        result = np.empty((rows, features_out), np.float32)
        write = median_ms(lambda: copy_rows(into, x), runs)
        read = median_ms(lambda: copy_rows(result, out_of), runs)
        return {"floor_write_ms": write, "floor_read_ms": read, "floor_ms": write + read,
                "input_placement": source.placement.name, "output_placement": sink.placement.name}
    finally:
        source.destroy()
        sink.destroy()


def thread_throughput(model, features: int, batch: int = THREAD_BATCH, calls: int = THREAD_CALLS) -> dict:
    x = np.random.default_rng(0).uniform(-1, 1, (batch, features)).astype(np.float32)
    model.run(x)
    results = {}
    for count in THREAD_COUNTS:
        barrier = threading.Barrier(count + 1)

        def work():
            barrier.wait()
            for _ in range(calls):
                model.run(x)

        threads = [threading.Thread(target=work) for _ in range(count)]
        for t in threads:
            t.start()
        barrier.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
        results[count] = count * calls * batch / seconds
    return results


def markdown(document: dict) -> str:
    env = document["environment"]
    lines = [f"# Host path: end-to-end `Model.run` on {env.get('vulkan', {}).get('device', '?')}",
             "", f"Driver {env.get('vulkan', {}).get('driver', '?')}, {env.get('date', '')}; median wall-clock ms "
             "of a whole call after warm-up. coopnn: `coopnn.load(model)` (weights='auto' chose "
             f"{', '.join(sorted(set(r['weights'] for r in document['rows'])))}); PyTorch: the same graph in fp16 "
             "under a CUDA graph. Floor: the same bytes copied into mapped device memory and out of host-cached "
             "memory with the same threads.", "",
             "| model | batch | run(x) | run(x, out=y) | device arrays | device arrays f16 | CUDA tensors | "
             "CUDA half | floor | PyTorch numpy | PyTorch pinned | PyTorch resident | coopnn GPU | PyTorch GPU | "
             "run / floor | run vs PyTorch numpy |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
    for r in document["rows"]:
        ratio = r["run_ms"] / r["floor_ms"] if r.get("floor_ms") else None
        speedup = r["torch_numpy_ms"] / r["run_ms"] if r.get("torch_numpy_ms") else None
        lines.append(f"| {r['model']} | 2^{r['log2_batch']} | {fmt(r['run_ms'])} | {fmt(r['out_ms'])} | "
                     f"{fmt(r.get('device_ms'))} | {fmt(r.get('device_f16_ms'))} | {fmt(r.get('cuda_ms'))} | "
                     f"{fmt(r.get('cuda_f16_ms'))} | {fmt(r.get('floor_ms'))} | "
                     f"{fmt(r.get('torch_numpy_ms'))} | "
                     f"{fmt(r.get('torch_pinned_ms'))} | {fmt(r.get('torch_resident_ms'))} | {fmt(r['gpu_ms'])} | "
                     f"{fmt(r.get('torch_gpu_ms'))} | {fmt(ratio)} | {fmt(speedup)}x |")
    lines += ["", "Phases of `run(x)` (ms, median): copy in (conversion included), submit, waiting for the GPU, "
              "copy out; chunks pipelined.", "",
              "| model | batch | copy in | submit | wait | copy out | total | chunks | host above GPU |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in document["rows"]:
        above = r["run_ms"] - (r["gpu_ms"] or 0)
        lines.append(f"| {r['model']} | 2^{r['log2_batch']} | {fmt(r['copy_in_ms'])} | {fmt(r['submit_ms'])} | "
                     f"{fmt(r['wait_ms'])} | {fmt(r['copy_out_ms'])} | {fmt(r['total_ms'])} | {r['chunks']} | "
                     f"{above * 1e3:.0f} µs |")
    lines += ["", f"One model shared by threads, {THREAD_BATCH} samples per call (M samples/s):", "",
              "| model | " + " | ".join(f"{n} threads" for n in THREAD_COUNTS) + " |",
              "|---|" + "---|" * len(THREAD_COUNTS)]
    for name, per in document["threads"].items():
        lines.append(f"| {name} | " + " | ".join(f"{per[str(n)] / 1e6:.0f}" for n in THREAD_COUNTS) + " |")
    return "\n".join(lines) + "\n"


def measure(model_paths, log2_batches, backend: str = "auto", torch: bool = True,
            thread_calls: int = THREAD_CALLS) -> dict:
    """The end-to-end document for `model_paths` at batches 2^k, printing each row as JSON as it is measured."""
    rows, threads = [], {}
    for path in model_paths:
        path = Path(path)
        model = coopnn.load(path, backend=backend)
        if not hasattr(model._executable, "last_timing"):
            model.close()
            raise CoopnnError(f"the end-to-end measurement times the Vulkan host path; {path.stem} runs on "
                              f"{model.backend} here ({model.backend_reason})")
        features = model.inputs[0].shape[1]
        for log2 in log2_batches:
            batch = 1 << log2
            x = np.random.default_rng(log2).uniform(-1, 1, (batch, features)).astype(np.float32)
            runs = runs_for(batch)
            row = {"model": path.stem, "log2_batch": log2, "backend": model.backend, "weights": model.weights}
            row.update(coopnn_rows(model, x, runs))
            row.update(copy_floor(model, x, runs))
            if torch:
                row.update(cuda_tensor_row(model, x, runs))
                row.update(torch_rows(BenchModel.load(path), x, runs))
            rows.append(row)
            print(json.dumps(row), flush=True)
        threads[path.stem] = {str(k): v for k, v in
                              thread_throughput(model, features, calls=thread_calls).items()}
        model.close()
    return {"environment": describe_environment(), "rows": rows, "threads": threads}


def write(document: dict, out: Path) -> Path:
    """`<out>/<device>-<date>-host-path.{json,md}`; returns the markdown's path."""
    return write_results(document, out, "host-path", markdown(document))
