"""Training benchmark: one optimizer step (L2 loss, Adam) of the benchmark MLPs on coopnn's training backends and in
PyTorch (AMP fp16 with fused Adam), side by side; writes `<out>/<device>-<date>-training.json` and `.md`.

    python3 bench/train.py               # batch 2^18, 30 timed steps after 2 s of warm-up per runner
    python3 bench/train.py --fit-steps 1000   # and a 1,000-step fit on a device-resident data set (GPU runners)
    python3 bench/train.py --quick       # a check that everything runs: batch 2^10, 3 steps
    python3 bench/train.py --runners "coopmat gradients,per-sample"   # only runners whose names contain these
    python3 bench/train.py --models tcnn_image --batch 65536   # tiny-cuda-nn's image configuration, each table atomics

`tcnn_image` is tiny-cuda-nn's image configuration (`coopnn.examples.image_models.TCNN_IMAGE_CONFIG`: a 16-level hash
grid and a 64-wide MLP, RelativeL2, its Adam, the grid's entries not decayed) on inputs in [0, 1): on coopvec the
per-sample step kernel (the one that trains grids) with each gradient method that takes it and each table atomics
method, and portable; its PyTorch row is refused (a plain-MLP baseline).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

import coopnn  # noqa: E402
from coopnn.bench.environment import describe_environment, device_name, driver, results_stem  # noqa: E402
from coopnn.bench.report import roofline_cells  # noqa: E402
from coopnn.bench.roofline import measured_peaks, peaks_for, training_work  # noqa: E402
from coopnn.bench.training import (CoopnnTrainingRunner, TorchAmpTrainingRunner, measure_training,  # noqa: E402
                                   torch_cuda_unavailable_reason)
from coopnn.backends.coopvec.training import GRADIENT_METHODS, TABLE_ATOMICS  # noqa: E402
from coopnn.errors import BackendUnavailableError  # noqa: E402
from coopnn.examples.image_models import TCNN_IMAGE_CONFIG  # noqa: E402
from coopnn.nets.tcnn_config import tcnn_loss, tcnn_optimizer  # noqa: E402
from coopnn.backends import statuses  # noqa: E402
from coopnn.tables import format_table  # noqa: E402

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
IMAGE_MODEL = "tcnn_image"
# the weight-gradient methods the per-sample step kernel runs with, which a grid's model trains with
PER_SAMPLE_GRADIENTS = ("coopmat", "coopvec", "outer_product", "outer_product_reduced")
RESULTS = ROOT / "bench" / "results"


def image_configuration():
    """The graph of tiny-cuda-nn's image configuration as `coopnn.from_tcnn_config` builds it, and the parameters
    its optimizer does not decay (the grid's)."""
    model, trainer = coopnn.from_tcnn_config(TCNN_IMAGE_CONFIG, 2, 3, backend="numpy")
    with model, trainer:
        return model.graph, trainer.optimizer.no_decay


def image_runners(graph, no_decay: tuple[str, ...], only: set[str] | None):
    """(name, factory) of every runner of tcnn's image configuration, with its loss and optimizer (a fresh one
    each)."""
    def tcnn(backend: str, **options: str):
        return CoopnnTrainingRunner(graph, backend, loss=tcnn_loss(TCNN_IMAGE_CONFIG),
                                    optimizer=tcnn_optimizer(TCNN_IMAGE_CONFIG, no_decay), **options)

    available = {s.name: s.available for s in statuses()}
    table = []
    if available.get("coopvec"):
        table += [(f"coopnn coopvec (per-sample step, {gradients} gradients, {atomics} table atomics)",
                   lambda gradients=gradients, atomics=atomics: tcnn("coopvec", gradients=gradients, step="coopvec",
                                                                     table_atomics=atomics))
                  for atomics in TABLE_ATOMICS if atomics != "auto" for gradients in PER_SAMPLE_GRADIENTS]
    if available.get("portable"):
        table.append(("coopnn portable", lambda: tcnn("portable")))
    return [(name, make) for name, make in table if only is None or any(o in name for o in only)]


def runners(graph, only: set[str] | None):
    """(name, factory) of every runner: the coopvec backend with each weight-gradient method (and the step kernel
    "auto" takes) and with each step kernel, portable, PyTorch."""
    available = {s.name: s.available for s in statuses()}
    table = []
    if available.get("coopvec"):
        table += [(f"coopnn coopvec ({method} gradients)", lambda method=method: CoopnnTrainingRunner(
            graph, "coopvec", method)) for method in GRADIENT_METHODS if method != "auto"]
        table += [(f"coopnn coopvec ({name} step, auto gradients)", lambda step=step: CoopnnTrainingRunner(
            graph, "coopvec", step=step)) for name, step in (("tiled", "tiled"), ("per-sample", "coopvec"))]
    if available.get("portable"):
        table.append(("coopnn portable", lambda: CoopnnTrainingRunner(graph, "portable")))
    if torch_cuda_unavailable_reason() is None:
        table.append(("PyTorch AMP + fused Adam", lambda: TorchAmpTrainingRunner(graph)))
    return [(name, make) for name, make in table if only is None or any(o in name for o in only)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="batch 2^10 and 3 steps: checks the harness")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--batch", type=int, default=1 << 18)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=float, default=2.0,
                   help="seconds of untimed steps per runner at least, then on until the step time settles")
    p.add_argument("--runners", help="only runners whose names contain one of these (comma-separated)")
    p.add_argument("--fit-steps", type=int, default=0,
                   help="also time a device-resident fit of this many steps (coopvec and PyTorch runners)")
    p.add_argument("--measure-peaks", action="store_true",
                   help="hold the steps against this GPU's own copy bandwidth and fp16 product rate (PyTorch)")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    batch, steps, warmup = (1 << 10, 3, 0.0) if args.quick else (args.batch, args.steps, args.warmup)
    only = set(args.runners.split(",")) if args.runners else None
    environment = describe_environment()
    bounds = peaks_for(device_name(environment), measured_peaks() if args.measure_peaks else None)
    results, graphs = [], {}
    for model in args.models.split(","):
        try:
            if model == IMAGE_MODEL:
                graph, no_decay = image_configuration()
            else:
                graph = coopnn.load(ROOT / "models" / f"{model}.onnx", backend="numpy").graph
        except BackendUnavailableError as e:
            print(f"{model}: {e}", file=sys.stderr)
            continue
        graphs[model] = graph
        made = image_runners(graph, no_decay, only) if model == IMAGE_MODEL else runners(graph, only)
        for name, make in made:
            fit_steps = args.fit_steps if "portable" not in name else 0  # portable: minutes per fit at this batch
            results.append(measure_training(name, make, model, graph, batch, steps, warmup, fit_steps=fit_steps,
                                            low=0.0 if model == IMAGE_MODEL else -1.0))
    def roof(r):
        """The step's roofline against its GPU time (`coopnn.bench.roofline.training_work`)."""
        if r.status != "measured":
            return None
        return training_work(graphs[r.model], r.batch, r.keeps_tape).against(r.gpu_ms.median if r.gpu_ms else None,
                                                                              bounds)

    def phase(r, name):
        return f"{r.phases[name]:.3f}" if r.phases else "-"

    def per_step(r, fit, name):
        return f"{getattr(fit, name) / r.fit_steps:.3f}" if fit is not None and getattr(fit, name) else "-"

    rows = [[r.model, r.runner, str(r.batch),
             f"{r.gpu_ms.median:.3f}" if r.gpu_ms else "-", f"{r.host_ms.median:.2f}" if r.host_ms else "-",
             f"{r.resident_host_ms.median:.2f}" if r.resident_host_ms else "-",
             f"{r.cuda_host_ms.median:.2f}" if r.cuda_host_ms else "-",
             f"{r.samples_per_s / 1e6:.3g} M" if r.samples_per_s else "-", *roofline_cells(roof(r)),
             phase(r, "step_kernel_ms"),
             phase(r, "weight_gradients_ms"),
             per_step(r, r.fit, "wall_ms"), per_step(r, r.fit, "gpu_ms"),
             f"{r.fit_samples_per_s / 1e6:.3g} M" if r.fit_samples_per_s else "-",
             per_step(r, r.fit_cuda, "wall_ms"), per_step(r, r.fit_cuda, "gpu_ms"), r.note[:60]] for r in results]
    table = format_table(["model", "runner", "batch", "GPU ms/step", "host ms/step", "host ms/step (data on GPU)",
                          "host ms/step (CUDA tensors)", "samples/s (GPU)", "MB moved", "GFLOP", "TB/s", "TFLOP/s",
                          "bound ms", "x bound",
                          "step kernel ms", "weight grads ms", "fit wall ms/step", "fit GPU ms/step",
                          "fit samples/s (wall)", "fit wall ms/step (CUDA data)", "fit GPU ms/step (CUDA data)",
                          "note"], rows)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"{results_stem(environment)}-training"
    document = {"schema": "coopnn-train-bench/2", "environment": environment,
                "roofline_peaks": asdict(bounds) if bounds else None,
                "results": [{**r.record(), "roofline": roof(r)} for r in results]}
    stem.with_suffix(".json").write_text(json.dumps(document, indent=1, default=str) + "\n")
    stem.with_suffix(".md").write_text(
        f"# Training step, {device_name(environment)} (driver {driver(environment)}), {environment['date'][:10]}\n\n"
        "L2 loss, Adam; GPU time of one whole step (median); samples/s = batch / GPU time. Host time of a step "
        "call: coopnn's `Trainer.step` from numpy arrays, and with the data on the GPU from coopnn device arrays and "
        "from PyTorch CUDA tensors; PyTorch's from CUDA tensors in all three columns. For coopnn, the step kernel "
        "(forward, loss, backward onto the tape) and the weight-gradient kernels timed apart; the rest of a step is "
        f"the optimizer and the conversion of the working copy. fit: {args.fit_steps} steps on batches drawn from a "
        "data set of 4 batches, the wall clock of the whole call per step (the data set's upload included) and "
        "samples/s by it, from numpy arrays and from PyTorch CUDA tensors (coopnn: a whole `Trainer.fit` without "
        "`on_step`, its steps one run, their GPU time beside it; PyTorch: `.cuda()` of the numpy arrays, "
        "`torch.randint` indices, no synchronisation until the end).\n\n"
        "Roofline (`coopnn.bench.roofline`): the bytes a step must move (inputs and targets in float32, the float16 "
        "tape written and read where the method keeps one, Adam's parameters and state) and its FLOPs (three "
        "products a layer), the rates reached in the GPU step time, the bound max(bytes / bandwidth, FLOPs / tensor "
        "peak) and the step as a multiple of it (x bound), against "
        + (f"{bounds.bandwidth_tbps:.3g} TB/s and {bounds.tensor_tflops:.3g} TFLOP/s ({bounds.source})"
           if bounds else "no bound (peaks unknown)") + ".\n\n"
        f"```\n{table}\n```\n")
    print(f"wrote {stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
