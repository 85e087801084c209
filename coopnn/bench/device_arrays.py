"""`Model.run` on `coopnn.to_device` arrays against the same batch from numpy, with the variants that tell the causes of
a slow run apart (bench/device_arrays.py runs it on the GPU machine).

For each model and batch, the median GPU time (timestamps around the dispatches) and wall clock of:
- `numpy`: `run(x)`, the host path (chunks pipelined over I/O slots);
- `device`: `run(to_device(x))`, the library's path: one dispatch over the arrays where they are;
- `float16`: `run(to_device(x, dtype="float16"))`, the float16-I/O kernel where the backend has one (coopvec): the
  column to hold beside tiny-cuda-nn's and Dr.Jit's, whose data is float16 on the GPU;
- `cuda` and `cuda_f16`: `run()` on PyTorch CUDA tensors, float32 and half (the latter the float16-I/O kernel through
  the CUDA bridge), with a synchronize, where PyTorch has a CUDA device; GPU time: the bridge's dispatches;
- `imported`: that dispatch on arrays that live in another VkDevice of the same GPU and are imported by fd into the
  model's, as `coopnn.to_device` arrays were when made before any model was loaded;
- `chunked`: the library's arrays copied into buffers of the host path's chunk size beforehand, then one dispatch a
  chunk in one submission with a barrier between them (the host path's dispatch shape, without its copies).
The ratio device / numpy is the one issue 44 pins; the variants say whether a gap is the import or the dispatch shape.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np

import coopnn
from coopnn.bench.environment import describe_environment, device_name
from coopnn.bench.models import BenchModel
from coopnn.bench.report import write_results
from coopnn.bench.roofline import inference_work, peaks_for

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
RUNS = 15
VARIANTS = ("numpy", "device", "float16", "cuda", "cuda_f16", "imported", "chunked")
HALF_VARIANTS = ("float16", "cuda_f16")  # float16 in and out: their roofline counts two bytes a value


def timed(call, gpu_ms, runs: int) -> dict:
    """Median wall ms of `call()` and median of `gpu_ms()` read after each call, after two warm-up calls."""
    for _ in range(2):
        call()
    walls, gpus = [], []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        walls.append((time.perf_counter() - start) * 1e3)
        gpus.append(gpu_ms())
    known = [g for g in gpus if g is not None]
    return {"wall_ms": statistics.median(walls), "gpu_ms": statistics.median(known) if known else None}


def _whole_dispatch(executable, buffers, batch: int):
    from coopnn.runtime.vk.commands import Dispatch

    return Dispatch(executable.kernel, tuple(buffers), executable.binary.pack_push(count=batch),
                    executable.kernel.group_count_for(batch))


def float16_run(model, x: np.ndarray, runs: int) -> dict:
    """`run` on float16 device arrays; the reason instead where the model's backend has no float16-I/O kernel."""
    half = coopnn.to_device(x, dtype="float16")
    try:
        model.run(half)
    except coopnn.InputError as e:
        return {"wall_ms": None, "gpu_ms": None, "reason": str(e)}
    return timed(lambda: model.run(half), lambda: model._executable.last_gpu_ms, runs)


def cuda_run(model, x: np.ndarray, runs: int, half: bool) -> dict:
    """`run` on a PyTorch CUDA tensor (half with `half`) and a synchronize; the reason instead without one."""
    from coopnn.bench.training import torch_cuda_unavailable_reason

    why = torch_cuda_unavailable_reason()
    if why is not None:
        return {"wall_ms": None, "gpu_ms": None, "reason": why}
    import torch

    tensor = torch.from_numpy(x).cuda()
    tensor = tensor.half() if half else tensor

    def call():
        model.run(tensor)
        torch.cuda.synchronize()

    return timed(call, lambda: model.last_gpu_ms, runs)


def imported_run(executable, x: np.ndarray, runs: int) -> dict:
    """One whole-batch dispatch on an input and output exported by a second VkDevice and imported into the model's."""
    from coopnn.interop.vk_export import ExportedBuffer
    from coopnn.runtime.vk.context import VulkanContext
    from coopnn.runtime.vk.fd_import import EXTENSION, ImportedFdBuffer
    from coopnn.runtime.vk.memory import upload_through_staging

    context = executable.context
    other = VulkanContext(context.info.index, extensions={EXTENSION})
    try:
        batch = x.shape[0]
        source = ExportedBuffer(other, x.nbytes)
        sink = ExportedBuffer(other, batch * executable.outputs[0].features * 4)
        upload_through_staging(other, source.handle, 0, x.reshape(-1).view(np.uint8))
        buffers = (executable.weight_buffer, ImportedFdBuffer(context, source), ImportedFdBuffer(context, sink))
        dispatch = _whole_dispatch(executable, buffers, batch)
        gpu = {}
        row = timed(lambda: gpu.__setitem__("ms", context.run([dispatch], downloads={})), lambda: gpu["ms"], runs)
        for buffer in buffers[1:]:
            buffer.destroy()
        return row
    finally:
        other.close()


def chunked_run(executable, device_x, runs: int) -> dict:
    """The host path's chunks as separate dispatches (barriers between) on buffers of one chunk each, filled from the
    device array on the GPU before timing."""
    from coopnn.runtime.host_path import split_batch
    from coopnn.runtime.vk.commands import Dispatch
    from coopnn.runtime.vk.lane import copy_buffer
    from coopnn.runtime.vk.memory import HostAccess

    context = executable.context
    batch = device_x.shape[0]
    chunk = split_batch(batch, min(executable.chunk, executable.max_chunk), executable.inputs, executable.outputs,
                        executable.binary.workgroup_size[0])
    row_in, row_out = device_x.nbytes // batch, executable.outputs[0].features * 4
    pieces = []
    for start in range(0, batch, chunk):
        count = min(chunk, batch - start)
        source = context.create_buffer(count * row_in, HostAccess.NONE)
        context.submit(lambda cmd, s=source, o=start * row_in, n=count * row_in:
                       copy_buffer(cmd, device_x.bound_in(context).handle, s.handle, o, 0, n))
        pieces.append((source, context.create_buffer(count * row_out, HostAccess.NONE), count))
    dispatches = [Dispatch(executable.kernel, (executable.weight_buffer, s, o), executable.binary.pack_push(count=n),
                           executable.kernel.group_count_for(n)) for s, o, n in pieces]
    gpu = {}
    try:
        row = timed(lambda: gpu.__setitem__("ms", context.run(dispatches, downloads={})), lambda: gpu["ms"], runs)
    finally:
        for source, sink, _ in pieces:
            source.destroy()
            sink.destroy()
    return {**row, "chunks": len(pieces)}


def measure_model(path: Path, log2_batch: int, runs: int = RUNS, backend: str = "auto") -> dict:
    model = coopnn.load(path, backend=backend)
    try:
        executable = model._executable
        if not hasattr(executable, "kernel"):
            return {"model": path.stem, "log2_batch": log2_batch, "backend": model.backend,
                    "skipped": f"runs on {model.backend}, not a Vulkan kernel ({model.backend_reason})"}
        features = model.inputs[0].shape[1]
        x = np.random.default_rng(log2_batch).uniform(-1, 1, (1 << log2_batch, features)).astype(np.float32)
        device_x = coopnn.to_device(x)
        np.testing.assert_allclose(model.run(device_x).numpy(), model.run(x), rtol=1e-6, atol=1e-6)
        graph = BenchModel.load(path).graph
        work, half_work = (inference_work(graph, 1 << log2_batch, io_itemsize=size) for size in (4, 2))
        row = {"model": path.stem, "log2_batch": log2_batch, "backend": model.backend, "weights": model.weights,
               "numpy": timed(lambda: model.run(x), lambda: executable.last_gpu_ms, runs),
               "device": timed(lambda: model.run(device_x), lambda: executable.last_gpu_ms, runs),
               "float16": float16_run(model, x, runs),
               "cuda": cuda_run(model, x, runs, half=False),
               "cuda_f16": cuda_run(model, x, runs, half=True),
               "imported": imported_run(executable, x, runs),
               "chunked": chunked_run(executable, device_x, runs)}
        bounds = peaks_for(device_name(describe_environment()))
        row["roofline"] = {v: (half_work if v in HALF_VARIANTS else work).against(row[v]["gpu_ms"], bounds)
                           for v in VARIANTS}
        return row
    finally:
        model.close()


def measure(model_paths, log2_batches, runs: int = RUNS, backend: str = "auto") -> dict:
    rows = []
    for path in model_paths:
        for log2 in log2_batches:
            row = measure_model(Path(path), log2, runs, backend)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return {"environment": describe_environment(), "rows": rows}


def markdown(document: dict) -> str:
    env = document["environment"]
    fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
    lines = [f"# `run()` on device arrays against numpy on {env.get('vulkan', {}).get('device', '?')}", "",
             f"Driver {env.get('vulkan', {}).get('driver', '?')}, {env.get('date', '')}. Median GPU ms (wall ms); "
             "`device` is the library's path, `imported` arrays of another VkDevice imported by fd (what arrays made "
             "before any model were), `chunked` the host path's dispatch shape on device buffers; `cuda`, `cuda_f16`: "
             "PyTorch CUDA tensors, float32 and half. Bound: "
             "`coopnn.bench.roofline` (bytes at the copy bandwidth or FLOPs at the tensor-core peak).", "",
             "| model | batch | " + " | ".join(VARIANTS) + " | device / numpy | device / bound | float16 / bound |",
             "|---|---|" + "---|" * (len(VARIANTS) + 3)]
    for r in document["rows"]:
        if "skipped" in r:
            lines.append(f"| {r['model']} | 2^{r['log2_batch']} | {r['skipped']} |" + "|" * (len(VARIANTS) + 2))
            continue
        cells = [f"{fmt(r[v]['gpu_ms'])} ({fmt(r[v]['wall_ms'])})" for v in VARIANTS]
        numpy_gpu, device_gpu = r["numpy"]["gpu_ms"], r["device"]["gpu_ms"]
        ratio = device_gpu / numpy_gpu if numpy_gpu and device_gpu else None
        lines.append(f"| {r['model']} | 2^{r['log2_batch']} | " + " | ".join(cells)
                     + f" | {fmt(ratio)} | {fmt(r['roofline']['device']['ratio_to_bound'])} | "
                     f"{fmt(r['roofline']['float16']['ratio_to_bound'])} |")
    return "\n".join(lines) + "\n"


def write(document: dict, out: Path) -> Path:
    """`<out>/<device>-<date>-device-arrays.{json,md}`; returns the markdown's path."""
    return write_results(document, out, "device-arrays", markdown(document))
