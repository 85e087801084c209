"""The coopvec inference kernel compiled with other workgroup sizes and `InferenceOptions`, timed on the same device
arrays as the kernel the backend ships (bench/inference_variants.py runs it on the GPU machine).

For each model (the three benchmark MLPs and tiny-cuda-nn's image configuration, a hash grid and a 64-wide MLP), batch
and I/O dtype (float32 as users pass arrays, float16 as tiny-cuda-nn and Dr.Jit read them), every variant is compiled
against the model's own converted weights (`KernelExecutable.binary.weight_image`, so all read one weight buffer), run
once and checked against the shipped kernel's outputs, then timed. A variant that fails to compile, to load or to
agree is reported with the reason and left out of the timing.

Timing: GPU timestamps around the dispatches of one submission. `chained` is one submission of `repeat` dispatches
back to back (a barrier between consecutive ones, as tiny-cuda-nn's and Dr.Jit's numbers in the anchors are calls
issued back to back), divided by `repeat`; `single` is a submission of one dispatch (what `Model.last_gpu_ms` and
bench/run.py report). Variants take turns, one submission each, so a clock change hits them all alike; medians over
the rounds after a warm-up round. `run()`, the library's own call on the same device arrays, is timed beside them as
the check that these numbers are the ones bench/device_arrays.py reports.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

import coopnn
from coopnn.backends.coopvec.backend import WORKGROUP_SIZE
from coopnn.backends.coopvec.inference_options import DEFAULT_OPTIONS, InferenceOptions
from coopnn.bench.environment import describe_environment, device_name
from coopnn.bench.report import write_results
from coopnn.bench.roofline import inference_work, peaks_for

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16", "hashgrid_image")
LOG2_BATCHES = (10, 14, 18, 21)
IO_DTYPES = {"f32": np.float32, "f16": np.float16}
ROUNDS = 9
CHAINED_SAMPLES = 1 << 23  # samples a chained submission covers, in 4 to 200 dispatches of the batch
TOLERANCE = {"rtol": 1e-3, "atol": 2.5e-3}  # against the shipped kernel's float16-rounded outputs


@dataclass(frozen=True)
class Variant:
    """A kernel to compile: workgroup size and options (`shipped`: the executable's own kernel, not recompiled)."""

    workgroup_size: int = WORKGROUP_SIZE
    options: InferenceOptions = DEFAULT_OPTIONS
    shipped: bool = False

    def describe(self) -> str:
        if self.shipped:
            return "the backend's kernel"
        return f"{self.workgroup_size} invocations a work-group, {self.options.describe()}"


STAGED = InferenceOptions(stage_rows=True)
PADDED = replace(STAGED, pad_rows=True)
RUNS = InferenceOptions(vector_table_reads=True)  # only the grid reads tables: elsewhere the default kernel
ELEMENTS = InferenceOptions(stage_elements=True)  # rows of 3 values (and the grid's 2 inputs) staged
STREAMING = InferenceOptions(streaming_rows=True)
PAIRS, QUADS = InferenceOptions(samples_per_invocation=2), InferenceOptions(samples_per_invocation=4)
VARIANTS = {
    "shipped": Variant(shipped=True),
    "default": Variant(),  # every option off (the shipped kernel reads grid vertices in one load)
    "wg32": Variant(32), "wg128": Variant(128), "wg256": Variant(256),
    "staged": Variant(options=STAGED), "padded": Variant(options=PADDED),
    "staged_wg32": Variant(32, STAGED), "padded_wg32": Variant(32, PADDED),
    "padded_wg128": Variant(128, PADDED), "padded_wg256": Variant(256, PADDED),
    "table_runs": Variant(options=RUNS), "table_runs_wg128": Variant(128, RUNS),
    "elements": Variant(options=ELEMENTS), "elements_wg32": Variant(32, ELEMENTS),
    "elements_table_runs": Variant(options=replace(ELEMENTS, vector_table_reads=True)),
    "streaming": Variant(options=STREAMING), "streaming_wg32": Variant(32, STREAMING),
    "streaming_pairs": Variant(options=replace(PAIRS, streaming_rows=True)),
    "pairs": Variant(options=PAIRS), "pairs_wg32": Variant(32, PAIRS), "quads": Variant(options=QUADS),
    "pairs_table_runs": Variant(options=replace(PAIRS, vector_table_reads=True)),
    "table_neighbours": Variant(options=replace(RUNS, neighbour_reads=True)),
    "pairs_table_neighbours": Variant(options=replace(PAIRS, vector_table_reads=True, neighbour_reads=True)),
}


def open_model(name: str, backend: str = "coopvec") -> coopnn.Model:
    """A benchmark MLP of models/, or `hashgrid_image` (tiny-cuda-nn's `config_hash.json`), with fp16 weights."""
    if name == "hashgrid_image":
        from coopnn.examples.image_models import TCNN_IMAGE_CONFIG

        # the model alone: `from_tcnn_config`'s trainer would need coopvec to train the grid
        network = TCNN_IMAGE_CONFIG["network"]
        return coopnn.mlp(2, [network["n_neurons"]] * network["n_hidden_layers"], 3,
                          encoding=TCNN_IMAGE_CONFIG["encoding"], backend=backend, weights="fp16",
                          initialisation="xavier")
    root = Path(__file__).resolve().parents[2]
    return coopnn.load(root / "models" / f"{name}.onnx", backend=backend, weights="fp16")


def compile_variant(model: coopnn.Model, name: str, variant: Variant, io_dtype: str):
    """(binary, kernel) of `variant` (called `name`) of the model's kernel with `io_dtype` rows."""
    from coopnn.backends import target
    from coopnn.runtime.executable import load_kernel
    from coopnn.shaders.kernel.lower import lower

    executable = model._executable
    if variant.shipped:
        return executable.kernel_for(io_dtype)
    binary = target("coopvec").compile(lower(model.graph), model.weight_format, variant.workgroup_size,
                                       packed=executable.binary.weight_image, io_dtype=io_dtype,
                                       options=variant.options)
    return binary, load_kernel(executable.context, binary, f"{model.graph.name} {name} ({io_dtype} I/O)")


def compiled_once(compiled: dict, model, name: str, variant: Variant, io_dtype: str):
    """`compile_variant` through `compiled` (the model's kernels so far, or the error compiling one raised), so that
    each is built once for every batch."""
    key = (name, io_dtype)
    if key not in compiled:
        try:
            compiled[key] = compile_variant(model, name, variant, io_dtype)
        except Exception as e:  # noqa: BLE001 - kept, and raised again for each batch that asks
            compiled[key] = e
    if isinstance(compiled[key], Exception):
        raise compiled[key]
    return compiled[key]


def checked_dispatches(model, variants: dict, io_dtype: str, inputs, outputs, batch: int, compiled: dict):
    """name -> Dispatch of every variant that compiles and gives the shipped kernel's outputs, and name -> reason
    for the others; kernels built once through `compiled` (`compiled_once`)."""
    from coopnn.runtime.vk.commands import Dispatch

    executable = model._executable
    dtype = IO_DTYPES[io_dtype]
    buffers = (executable.weight_buffer, inputs.bound_in(executable.context, dtype),
               outputs.bound_in(executable.context, dtype))
    expected = model.run(inputs).numpy().astype(np.float32)
    dispatches, failed = {}, {}
    for name, variant in variants.items():
        try:
            binary, kernel = compiled_once(compiled, model, name, variant, io_dtype)
            dispatch = Dispatch(kernel, buffers, binary.pack_push(count=batch), kernel.group_count_for(batch))
            executable.context.run([dispatch], downloads={})
            got = outputs.numpy().astype(np.float32)
        except Exception as e:  # noqa: BLE001 - a variant that cannot run is reported, and the others still run
            failed[name] = f"{type(e).__name__}: {e}"
            continue
        if not np.allclose(got, expected, **TOLERANCE):
            failed[name] = f"outputs differ from run(): max abs difference {np.abs(got - expected).max():.3g}"
            continue
        dispatches[name] = dispatch
    return dispatches, failed


def timed(context, dispatches: dict, repeat: int, rounds: int) -> dict:
    """name -> {chained, single, chained_min}: median GPU ms a dispatch, variants in turn (`rounds` after one)."""
    from coopnn.runtime.vk.recording import Recording

    recordings = {name: Recording(context, [d]) for name, d in dispatches.items()}
    chained = {name: [] for name in dispatches}
    single = {name: [] for name in dispatches}
    try:
        for index in range(rounds + 1):
            for name, recording in recordings.items():
                ms_chain, ms_one = recording.run(repeat), recording.run(1)
                if index and ms_chain is not None and ms_one is not None:
                    chained[name].append(ms_chain / repeat)
                    single[name].append(ms_one)
    finally:
        for recording in recordings.values():
            recording.destroy()
    return {name: {"chained": statistics.median(chained[name]) if chained[name] else None,
                   "chained_min": min(chained[name], default=None),
                   "single": statistics.median(single[name]) if single[name] else None} for name in dispatches}


def library_run_ms(model, inputs, rounds: int) -> float | None:
    """Median `Model.last_gpu_ms` of `run()` on the device arrays (the library's own path), after one warm-up."""
    times = []
    for index in range(rounds + 1):
        model.run(inputs)
        if index and model.last_gpu_ms:
            times.append(model.last_gpu_ms)
    return statistics.median(times) if times else None


def measure_case(model, model_name: str, log2_batch: int, io_dtype: str, variants: dict, rounds: int, bounds,
                 compiled: dict, chained_samples: int = CHAINED_SAMPLES) -> list[dict]:
    batch = 1 << log2_batch
    features = model.inputs[0].shape[1]
    x = np.random.default_rng(log2_batch).random((batch, features), dtype=np.float32)  # in [0, 1): the grid's domain
    inputs = coopnn.to_device(x, dtype=IO_DTYPES[io_dtype])
    outputs = coopnn.to_device(np.zeros((batch, model.outputs[0].shape[1]), np.float32), dtype=IO_DTYPES[io_dtype])
    dispatches, failed = checked_dispatches(model, variants, io_dtype, inputs, outputs, batch, compiled)
    repeat = max(4, min(200, chained_samples // batch))
    times = timed(model._executable.context, dispatches, repeat, rounds)
    work = inference_work(model.graph, batch, io_itemsize=np.dtype(IO_DTYPES[io_dtype]).itemsize)
    base = {"model": model_name, "log2_batch": log2_batch, "io": io_dtype, "repeat": repeat,
            "run_ms": library_run_ms(model, inputs, rounds)}
    rows = [{**base, "variant": name, "error": why} for name, why in failed.items()]
    for name, t in times.items():
        variant = variants[name]
        rows.append({**base, "variant": name, "workgroup_size": None if variant.shipped else variant.workgroup_size,
                     "options": None if variant.shipped else vars(variant.options), **t,
                     "roofline": work.against(t["chained"], bounds)})
    return rows


def driver_statistics(model_name: str, compiled: dict) -> list[dict]:
    """What the driver reports (registers, spills, workgroup memory) of each kernel in `compiled` that was built;
    one row with the reason where the driver reports nothing."""
    from coopnn.runtime.kernel_statistics import kernel_statistics

    binaries = {f"{model_name} {name} ({io})": made[0] for (name, io), made in compiled.items()
                if not isinstance(made, Exception)}
    try:
        return [{"kernel": k.kernel, "workgroup_size": k.workgroup_size, "values": k.values()}
                for k in kernel_statistics(binaries)]
    except Exception as e:  # noqa: BLE001 - statistics are a diagnostic: the timings stand without them
        return [{"kernel": model_name, "error": f"{type(e).__name__}: {e}"}]


def measure(models, log2_batches, variants: dict, rounds: int = ROUNDS, io_dtypes=tuple(IO_DTYPES),
            backend: str = "coopvec", chained_samples: int = CHAINED_SAMPLES, statistics: bool = False) -> dict:
    """Every case of `models` (names) x `log2_batches` x `io_dtypes`; a model that cannot be opened is a row with
    its error. `backend`: what runs the shipped kernel (another Vulkan backend checks this bench without
    cooperative vectors; the other variants then fail); `chained_samples` as `CHAINED_SAMPLES`; `statistics`: the
    driver's statistics of every kernel built (`driver_statistics`)."""
    environment = describe_environment()
    bounds = peaks_for(device_name(environment))
    rows, kernels = [], []
    for name in models:
        try:
            model = open_model(name, backend)
        except Exception as e:  # noqa: BLE001 - the other models still run
            rows.append({"model": name, "variant": "*", "error": f"{type(e).__name__}: {e}"})
            continue
        compiled: dict = {}
        with model:
            for log2 in log2_batches:
                for io_dtype in io_dtypes:
                    for row in measure_case(model, name, log2, io_dtype, variants, rounds, bounds, compiled,
                                            chained_samples):
                        rows.append(row)
                        print(json.dumps(row), flush=True)
        if statistics:
            kernels += driver_statistics(name, compiled)
    return {"environment": environment, "variants": {k: v.describe() for k, v in variants.items()}, "rows": rows,
            "statistics": kernels}


def markdown(document: dict) -> str:
    env = document["environment"]
    fmt = lambda v: "–" if v is None else f"{v:.4f}"  # noqa: E731
    lines = [f"# coopvec inference kernel variants on {env.get('vulkan', {}).get('device', '?')}", "",
             f"Driver {env.get('vulkan', {}).get('driver', '?')}, {env.get('date', '')}. GPU ms a dispatch on device "
             "arrays: `chained` the median of submissions of `repeat` dispatches back to back (their time over "
             "`repeat`), `single` of one-dispatch submissions, `run()` the library's call (`Model.last_gpu_ms`) on "
             "the same arrays; x bound: chained over the roofline bound (`coopnn.bench.roofline`). Variants: "
             + "; ".join(f"`{k}` {v}" for k, v in document["variants"].items()) + ".", "",
             "| model | batch | I/O | variant | chained | (min) | single | run() | x bound | repeat |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in document["rows"]:
        head = f"| {r['model']} | 2^{r.get('log2_batch', '?')} | {r.get('io', '')} | {r['variant']} |"
        if "error" in r:
            lines.append(f"{head} failed: {r['error'][:300]} | | | | | |")
            continue
        lines.append(f"{head} {fmt(r['chained'])} | {fmt(r['chained_min'])} | {fmt(r['single'])} | "
                     f"{fmt(r['run_ms'])} | {fmt(r['roofline']['ratio_to_bound'])} | {r['repeat']} |")
    return "\n".join(lines + statistics_lines(document.get("statistics", []))) + "\n"


def statistics_lines(kernels: list[dict]) -> list[str]:
    """The driver's statistics, a row per kernel and a column per statistic (as the driver names them)."""
    if not kernels:
        return []
    columns = list(dict.fromkeys(name for k in kernels for name in k.get("values", {})))
    lines = ["", "## What the driver made of each kernel", "", "| kernel | " + " | ".join(columns) + " |",
             "|---|" + "---|" * len(columns)]
    for k in kernels:
        if "error" in k:
            lines.append(f"| {k['kernel']} | {k['error'][:200]} |" + " |" * (len(columns) - 1))
            continue
        lines.append(f"| {k['kernel']} | " + " | ".join(str(k["values"].get(c, "")) for c in columns) + " |")
    return lines


def write(document: dict, out: Path) -> Path:
    """`<out>/<device>-<date>-inference-variants.{json,md}`; returns the markdown's path."""
    return write_results(document, out, "inference-variants", markdown(document))
