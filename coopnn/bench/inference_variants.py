"""The coopvec inference kernel compiled with other workgroup sizes, timed on the same device arrays against the one
the backend ships (bench/inference_variants.py runs it on the GPU machine).

For each model, batch and I/O dtype (float32, float16): every workgroup size is compiled against the model's own
converted weights (`KernelExecutable.binary.weight_image`, so the variants read the same weight buffer), and the
variants are timed round-robin, one dispatch each in turn, so a clock change hits them all alike; each one's median GPU
time and its ratio to the roofline bound are reported. What the backend should ship is chosen from these files.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np

import coopnn
from coopnn.bench.environment import describe_environment, device_name
from coopnn.bench.models import BenchModel
from coopnn.bench.report import write_results
from coopnn.bench.roofline import inference_work, peaks_for
from coopnn.errors import CoopnnError
from coopnn.layouts.formats import weight_format

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
WORKGROUP_SIZES = (32, 64, 128, 256)
IO_DTYPES = {"f32": np.float32, "f16": np.float16}
ROUNDS = 20


def variant_kernels(model, io_dtype: str, sizes) -> dict:
    """Workgroup size -> (binary, kernel) of the model's coopvec kernel with that size and `io_dtype` rows."""
    from coopnn.backends import target
    from coopnn.runtime.executable import load_kernel
    from coopnn.shaders.kernel.lower import lower

    executable = model._executable
    program = lower(model.graph)
    fmt = weight_format(model.weights)
    made = {}
    for size in sizes:
        binary = target("coopvec").compile(program, fmt, size, packed=executable.binary.weight_image,
                                           io_dtype=io_dtype)
        made[size] = (binary, load_kernel(executable.context, binary, f"{model.graph.name} wg{size} {io_dtype}"))
    return made


def time_round_robin(context, dispatches: dict, rounds: int) -> dict:
    """Median GPU ms of each dispatch (by key), submitted in turn `rounds` times after one warm-up round."""
    times = {key: [] for key in dispatches}
    for index in range(rounds + 1):
        for key, dispatch in dispatches.items():
            ms = context.run([dispatch], downloads={})
            if index:
                times[key].append(ms)
    return {key: statistics.median(t) if None not in t else None for key, t in times.items()}


def measure_model(path: Path, log2_batch: int, sizes=WORKGROUP_SIZES, rounds: int = ROUNDS) -> list[dict]:
    from coopnn.runtime.vk.commands import Dispatch

    rows = []
    with coopnn.load(path, backend="coopvec", weights="fp16") as model:
        executable = model._executable
        graph = BenchModel.load(path).graph
        batch = 1 << log2_batch
        x = np.random.default_rng(log2_batch).uniform(-1, 1, (batch, model.inputs[0].shape[1]))
        bounds = peaks_for(device_name(describe_environment()))
        for io_dtype, dtype in IO_DTYPES.items():
            inputs = coopnn.to_device(x, dtype=dtype)
            outputs = coopnn.to_device(np.zeros((batch, model.outputs[0].shape[1])), dtype=dtype)
            expected = model.run(inputs).numpy()
            buffers = (executable.weight_buffer, inputs.bound_in(executable.context, dtype),
                       outputs.bound_in(executable.context, dtype))
            kernels = variant_kernels(model, io_dtype, sizes)
            dispatches = {size: Dispatch(kernel, buffers, binary.pack_push(count=batch),
                                         kernel.group_count_for(batch)) for size, (binary, kernel) in kernels.items()}
            for size, dispatch in dispatches.items():
                executable.context.run([dispatch], downloads={})
                got = outputs.numpy().astype(np.float32)
                if not np.allclose(got, expected.astype(np.float32), rtol=1e-3, atol=2.5e-3):
                    raise CoopnnError(f"{path.stem}: workgroups of {size} ({io_dtype}) gave other outputs")
            medians = time_round_robin(executable.context, dispatches, rounds)
            work = inference_work(graph, batch, io_itemsize=np.dtype(dtype).itemsize)
            for size, ms in medians.items():
                rows.append({"model": path.stem, "log2_batch": log2_batch, "io": io_dtype, "workgroup_size": size,
                             "shipped": size == executable.binary.workgroup_size[0], "gpu_ms": ms,
                             "roofline": work.against(ms, bounds)})
    return rows


def measure(model_paths, log2_batches, sizes=WORKGROUP_SIZES, rounds: int = ROUNDS) -> dict:
    rows = []
    for path in model_paths:
        for log2 in log2_batches:
            for row in measure_model(Path(path), log2, sizes, rounds):
                rows.append(row)
                print(json.dumps(row), flush=True)
    return {"environment": describe_environment(), "rows": rows}


def markdown(document: dict) -> str:
    env = document["environment"]
    fmt = lambda v: "–" if v is None else f"{v:.4f}"  # noqa: E731
    lines = [f"# coopvec inference kernel by workgroup size on {env.get('vulkan', {}).get('device', '?')}", "",
             f"Driver {env.get('vulkan', {}).get('driver', '?')}, {env.get('date', '')}. Median GPU ms of one "
             "dispatch on device arrays, variants in turn; * the size the backend ships; x bound: the time over "
             "the roofline bound (`coopnn.bench.roofline`).", "",
             "| model | batch | I/O | workgroup | GPU ms | TB/s | TFLOP/s | x bound |",
             "|---|---|---|---|---|---|---|---|"]
    for r in document["rows"]:
        roof = r["roofline"]
        rates = [fmt(roof[k]) if roof[k] is not None else "–" for k in ("tb_per_s", "tflop_per_s", "ratio_to_bound")]
        lines.append(f"| {r['model']} | 2^{r['log2_batch']} | {r['io']} | {r['workgroup_size']}"
                     f"{' *' if r['shipped'] else ''} | {fmt(r['gpu_ms'])} | " + " | ".join(rates) + " |")
    return "\n".join(lines) + "\n"


def write(document: dict, out: Path) -> Path:
    """`<out>/<device>-<date>-inference-variants.{json,md}`; returns the markdown's path."""
    return write_results(document, out, "inference-variants", markdown(document))
