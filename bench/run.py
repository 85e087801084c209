"""Runs the benchmark suite: the three benchmark MLPs and the zoo's neural-shading models on every available coopnn
backend and baseline, and writes `<out>/<device>-<date>.json`, `.md` and `.png` (see bench/README.md).

    python3 bench/run.py                 # the full suite: batches 2^14, 2^18, 2^21, 30 runs after warm-up, then the
                                         # end-to-end section (`coopnn.bench.end_to_end`, also bench/host_path.py)
    python3 bench/run.py --quick         # a check that everything runs: small batches, few runs, well under a minute
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

from coopnn.bench import end_to_end  # noqa: E402
from coopnn.bench.caches import disable_driver_shader_caches  # noqa: E402
from coopnn.bench.environment import results_stem  # noqa: E402
from coopnn.bench.measure import Budget  # noqa: E402
from coopnn.bench.plot import plot_throughput, plot_unavailable_reason  # noqa: E402
from coopnn.bench.report import markdown_report, save, text_report  # noqa: E402
from coopnn.bench.runners import select_runners  # noqa: E402
from coopnn.bench.suite import DEFAULT_BATCHES, Settings, parse_batches, run_suite  # noqa: E402
from coopnn.bench.torch_runners import cuda_unavailable_reason  # noqa: E402
from coopnn.errors import CoopnnError  # noqa: E402

BENCHMARK_MLPS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
NEURAL_SHADING = ("neural_material_freq", "siren_sdf", "nerf_skip_two_heads", "radiance_cache_layernorm",
                  "sdf_softplus")
SUITE = BENCHMARK_MLPS + NEURAL_SHADING
RESULTS = ROOT / "bench" / "results"
END_TO_END_BATCHES = (10, 14, 18, 21)  # log2

# --quick: proves the harness end to end on any machine (numpy and lavapipe included) in seconds, not a measurement.
QUICK_BATCHES = (1 << 10, 1 << 12)
QUICK_BUDGET = Budget(runs=3, warmup=1, min_runs=2, seconds_per_batch=0.3, max_run_seconds=0.25)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    budget = Budget()
    p.add_argument("--quick", action="store_true",
                   help="small batches (2^10, 2^12) and 3 runs: checks the harness, measures nothing worth keeping")
    p.add_argument("--models", default=",".join(SUITE), help="zoo model names, comma-separated (default: the suite)")
    p.add_argument("--backend", default="all", help="coopnn backends: all (default), none, or names")
    p.add_argument("--baseline", default="all", help="baselines: all (default: those installed), none, or names")
    p.add_argument("--batches", type=parse_batches, help="batch sizes, e.g. 2^14,2^18,2^21 (the default)")
    p.add_argument("--weights", default="fp16", help="coopnn weight format (default fp16, as the PyTorch baseline)")
    p.add_argument("--runs", type=int, help=f"timed runs per batch (default {budget.runs})")
    p.add_argument("--budget", type=float,
                   help=f"seconds of timed runs per batch before runs are cut (default {budget.seconds_per_batch:g})")
    p.add_argument("--max-run", type=float, help="skip batches whose one run would take longer, in seconds "
                                                 f"(default {budget.max_run_seconds:g})")
    p.add_argument("--out", type=Path, default=RESULTS, help=f"directory for the results (default {RESULTS})")
    p.add_argument("--measure-peaks", action="store_true",
                   help="hold the rows against this GPU's own copy bandwidth and fp16 product rate, measured through "
                        "PyTorch (default: the H200 anchors, else datasheet figures)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument("--no-end-to-end", action="store_true",
                   help="skip the end-to-end section (Model.run against PyTorch's paths and the copy floor)")
    return p.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    base = QUICK_BUDGET if args.quick else Budget()
    runs = args.runs or base.runs
    budget = Budget(runs=runs, warmup=base.warmup, min_runs=min(base.min_runs, runs),
                    seconds_per_batch=args.budget or base.seconds_per_batch,
                    max_run_seconds=args.max_run or base.max_run_seconds)
    batches = args.batches or (QUICK_BATCHES if args.quick else DEFAULT_BATCHES)
    return Settings(batches=batches, weights=args.weights, budget=budget, measure_peaks=args.measure_peaks)


def model_paths(names: str) -> list[Path]:
    paths = [ROOT / "models" / f"{name.strip()}.onnx" for name in names.split(",") if name.strip()]
    missing = [p.stem for p in paths if not p.is_file()]
    if missing:
        known = ", ".join(sorted(p.stem for p in (ROOT / "models").glob("*.onnx")))
        raise CoopnnError(f"no such zoo model: {', '.join(missing)}; the zoo has {known}")
    return paths


def write_results(document: dict, out: Path, stem: str, plot: bool) -> list[str]:
    """The JSON, the markdown table and (when asked and matplotlib is there) the PNG; returns what was done."""
    done = []
    save(document, out / f"{stem}.json")
    (out / f"{stem}.md").write_text(markdown_report(document))
    done += [f"wrote {out / f'{stem}.json'}", f"wrote {out / f'{stem}.md'}"]
    why = plot_unavailable_reason() if plot else "--no-plot"
    if why:
        done.append(f"no plot ({why}); later: python3 bench/plot.py {out / f'{stem}.json'}")
    else:
        done.append(f"wrote {plot_throughput(document, out / f'{stem}.png')}")
    return done


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    disable_driver_shader_caches()  # before anything loads a Vulkan driver, which reads them once
    try:
        paths = model_paths(args.models)
        specs = select_runners(args.backend, args.baseline)
        document = run_suite(paths, specs, settings_from(args), label="bench/run.py")
    except CoopnnError as e:
        print(f"bench/run.py: error: {e}", file=sys.stderr)
        return 1
    print(text_report(document))
    stem = results_stem(document["environment"]) + ("-quick" if args.quick else "")
    for line in write_results(document, args.out, stem, plot=not args.no_plot):
        print(line)
    print(f"suite took {document['seconds']:.0f} s")
    if not (args.quick or args.no_end_to_end):
        print(end_to_end_section(paths, args.out))
    return 0


def end_to_end_section(paths: list[Path], out: Path) -> str:
    """The end-to-end measurement of the benchmark MLPs among `paths` (`coopnn.bench.end_to_end`), or why not."""
    mlps = [p for p in paths if p.stem in BENCHMARK_MLPS]
    if not mlps:
        return "end-to-end: no benchmark MLP among the models"
    try:
        document = end_to_end.measure(mlps, END_TO_END_BATCHES, torch=cuda_unavailable_reason() is None)
    except CoopnnError as e:
        return f"end-to-end: skipped ({e})"
    return end_to_end.write(document, out).read_text()


if __name__ == "__main__":
    sys.exit(main())
