"""tiny-cuda-nn's image configuration (`coopnn fit-image --encoding hashgrid`) in one call: the GPU time of a training
step at 2^16 and 2^18 and the wall clock of a 1,000-step `fit` for each coopnn backend that trains grids here,
inference at 2^21 on each backend that runs the model, and the PSNR after 1,000 and 10,000 steps on slangpy's
1024 x 1024 photograph next to the plain-PyTorch reference trained in the same call; writes
`<out>/<device>-<date>-hashgrid.json` and `.md`.

    python3 bench/hashgrid.py --out "$OUT"      # the whole measurement (about 5 minutes on an H200)
    python3 bench/hashgrid.py --fit-steps 1000   # PSNR after 1,000 steps only
    python3 bench/hashgrid.py --quick            # a check that everything runs: a 64 x 64 crop, tiny batches

Runs that would end past `--budget` seconds from the start (projected from the pace of their first 1,000 steps) are
skipped and the report says so; the PyTorch reference runs before coopnn's fits and leaves them `RESERVE` seconds
each.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

from coopnn.backends import statuses, training_backends  # noqa: E402
from coopnn.bench.environment import describe_environment, device_name, driver, results_stem  # noqa: E402
from coopnn.bench.image_config import (WEIGHTS, Reason, attempt, fit_quality, image_data,  # noqa: E402
                                       inference_gpu_ms, step_gpu_ms)
from coopnn.bench.suite import parse_batches  # noqa: E402
from coopnn.bench.training import torch_cuda_unavailable_reason  # noqa: E402
from coopnn.examples.image_models import TCNN_IMAGE_CONFIG, megapixel_image_path  # noqa: E402

RESULTS = ROOT / "bench" / "results"
RESERVE = 60.0  # seconds the PyTorch reference leaves for each coopnn backend's fits
ANCHORS = "bench/results/nvidia-h200-2026-12-01-anchors.md"  # tcnn's own figures for this configuration


def arguments(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a 64 x 64 crop, batches 2^10, few steps: checks the harness")
    p.add_argument("--image", help="image file (default: slangpy's monalisa.jpg)")
    p.add_argument("--step-batches", type=parse_batches, default=(1 << 16, 1 << 18),
                   help="batches at which a training step is timed")
    p.add_argument("--timed-steps", type=int, default=200, help="steps timed at each of them, after --warmup-steps")
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--fit-batch", type=parse_batches, default=(1 << 18,), help="batch of the quality fits")
    p.add_argument("--fit-steps", type=int, nargs="+", default=[1000, 10000],
                   help="steps after which the PSNR is read (the first also gives the fit's wall clock)")
    p.add_argument("--infer-batch", type=parse_batches, default=(1 << 21,))
    p.add_argument("--infer-runs", type=int, default=30)
    p.add_argument("--backends", help="coopnn backends to measure (comma-separated; default: every one available)")
    p.add_argument("--torch-device", default="cuda", help="device of the PyTorch reference (none: leave it out)")
    p.add_argument("--budget", type=float, default=340.0, help="seconds the whole call may take, about")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    if args.quick:
        args.step_batches, args.timed_steps, args.warmup_steps = (1 << 10,), 5, 2
        args.fit_batch, args.fit_steps, args.infer_batch, args.infer_runs = (1 << 10,), [20, 40], (1 << 12,), 3
        if torch_cuda_unavailable_reason() is not None and args.torch_device == "cuda":
            args.torch_device = "cpu"
    return args


def chosen_backends(only: str | None) -> tuple[list[str], list[str]]:
    """(training, inference) backends to measure: the available GPU ones, or those named."""
    available = [s.name for s in statuses() if s.available and s.name != "numpy"]
    if only is not None:
        available = [name for name in only.split(",") if name]
    return [b for b in available if b in training_backends()], available


def torch_reference(args, image: str, size: int | None, seconds: float) -> dict:
    """The PyTorch reference's (step, PSNR, ms a step) rows, or why there are none."""
    if args.torch_device == "none":
        return {"reason": "left out (--torch-device none)"}
    if args.torch_device.startswith("cuda") and (why := torch_cuda_unavailable_reason()) is not None:
        return {"reason": why}
    from coopnn.examples.torch_image_reference import train

    rows = train(sorted(args.fit_steps), args.fit_batch[0], args.torch_device, image=image, size=size,
                 seconds=seconds)
    skipped = [s for s in args.fit_steps if s not in {r[0] for r in rows}]
    return {"rows": [{"step": s, "psnr_db": p, "ms_per_step": ms} for s, p, ms in rows],
            "reason": f"{', '.join(map(str, skipped))} steps would end past the time budget" if skipped else ""}


def measure(args) -> dict:
    started = time.monotonic()
    deadline = started + args.budget
    image = args.image or str(megapixel_image_path())
    size = 64 if args.quick else None
    data = image_data(image, size)
    training, inference = chosen_backends(args.backends)
    report = {"image": image, "side": data.side, "config": TCNN_IMAGE_CONFIG, "steps": {}, "inference": {},
              "fits": {}, "torch": {}}
    for backend in inference:
        timing = attempt(lambda: inference_gpu_ms(backend, args.infer_batch[0], args.infer_runs))
        report["inference"][backend] = {"reason": timing.why} if isinstance(timing, Reason) else asdict(timing)
    for backend in training:
        timing = attempt(lambda: step_gpu_ms(backend, data, list(args.step_batches), args.timed_steps,
                                             args.warmup_steps))
        report["steps"][backend] = {"reason": timing.why} if isinstance(timing, Reason) else timing
    trains = [b for b in training if "reason" not in report["steps"][b]]
    report["torch"] = torch_reference(args, image, size, deadline - time.monotonic() - RESERVE * len(trains))
    for backend in trains:
        fit = attempt(lambda: fit_quality(backend, data, args.fit_batch[0], args.fit_steps, deadline))
        report["fits"][backend] = {"reason": fit.why} if isinstance(fit, Reason) else asdict(fit)
    report["seconds"] = time.monotonic() - started
    return report


def _cell(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(report: dict, environment: dict, args) -> str:
    """The report's table: one column per coopnn backend, then the PyTorch reference."""
    backends = list(dict.fromkeys([*report["inference"], *report["steps"]]))
    torch_rows = {r["step"]: r for r in report["torch"].get("rows", [])}
    header = ["what", *(f"coopnn {b} ({WEIGHTS.get(b, 'fp32')})" for b in backends), "PyTorch reference (fp32)"]
    rows = []
    for batch in args.step_batches:
        cells = [_cell(report["steps"].get(b, {}).get(batch)) for b in backends]
        rows.append([f"training step, 2^{batch.bit_length() - 1} samples, GPU ms", *cells, "-"])
    first = min(args.fit_steps)
    fits = report["fits"]

    def checkpoint(backend, step, index):
        found = [c for c in fits.get(backend, {}).get("checkpoints", []) if c[0] == step]
        return _cell(found[0][index], 2) if found else "-"

    torch_first = torch_rows.get(first)
    rows.append([f"{first:,}-step fit at 2^{args.fit_batch[0].bit_length() - 1}, wall s",
                 *(checkpoint(b, first, 1) for b in backends),
                 _cell(torch_first["ms_per_step"] * first / 1e3, 2) if torch_first else "-"])
    for step in sorted(args.fit_steps):
        rows.append([f"PSNR after {step:,} steps, dB", *(checkpoint(b, step, 2) for b in backends),
                     _cell(torch_rows[step]["psnr_db"], 2) if step in torch_rows else "-"])
    rows.append([f"inference, 2^{args.infer_batch[0].bit_length() - 1} samples, GPU ms (median)",
                 *(_cell(report["inference"].get(b, {}).get("median")) for b in backends), "-"])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    notes = [f"- coopnn {b}: {r['reason']}" for part in ("inference", "steps", "fits")
             for b, r in report[part].items() if r.get("reason")]
    notes += [f"- coopnn {b}: {f['skipped']}" for b, f in fits.items() if f.get("skipped")]
    if report["torch"].get("reason"):
        notes.append(f"- PyTorch reference: {report['torch']['reason']}")
    return (f"# tiny-cuda-nn's image configuration, {device_name(environment)} (driver {driver(environment)}), "
            f"{environment['date'][:10]}, commit {environment['commit']}\n\n"
            f"`python3 bench/hashgrid.py`: HashGrid 16 levels x 2 features, 2^15 entries a level, base resolution "
            f"16, per-level scale 1.5; 64-wide MLP, 2 hidden layers; RelativeL2; Adam (tcnn's `config_hash.json`, "
            f"`coopnn/examples/image_models.py`), learning the {report['side']} x {report['side']} image "
            f"`{Path(report['image']).name}` whole. A step's GPU time: {args.timed_steps} steps of one `fit` on the "
            f"device-resident image after {args.warmup_steps} untimed. A fit: a fresh model, one `Trainer.fit` "
            f"(data upload included) up to each PSNR step, PSNR over every pixel. Inference: `Model.run` on "
            f"uniform points, GPU time from timestamps. The PyTorch reference "
            f"(`coopnn/examples/torch_image_reference.py`, a plain PyTorch hash grid, no biases) trains on the same "
            f"image; its wall clock is its synchronised steps. tiny-cuda-nn's figures for this configuration: "
            f"`{ANCHORS}`. The call took {report['seconds']:.0f} s.\n\n" + "\n".join(lines) + "\n"
            + ("\n" + "\n".join(notes) + "\n" if notes else ""))


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    environment = describe_environment()
    report = measure(args)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"{results_stem(environment)}-hashgrid"
    document = {"schema": "coopnn-hashgrid-bench/1", "environment": environment, **report}
    stem.with_suffix(".json").write_text(json.dumps(document, indent=1, default=str) + "\n")
    text = markdown(report, environment, args)
    stem.with_suffix(".md").write_text(text)
    print(text)
    print(f"wrote {stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
