"""Throughput of each weight format on one coopnn backend against its float16 and against PyTorch, in one run.

    python3 bench/weight_formats.py [--backend coopvec] [--formats fp16,fp8_e4m3,fp8_e5m2,int8] [--batches 14,18,21]

For the three benchmark MLPs at each batch: the median GPU time of `run()` and its wall-clock time (host to host,
float32 arrays in and out) per format, each format's speed relative to float16, the weight bytes it keeps on the
device against float32 and float16, and PyTorch (float16, CUDA graph) on the same GPU as the baseline. int8 is
calibrated on 4096 samples other than the timed ones. Writes
`bench/results/<device>-<date>-weight-formats.json` and `.md` and prints the table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

from coopnn.bench.end_to_end import MODELS as BENCHMARK_MLPS  # noqa: E402
from coopnn.bench.environment import describe_environment, device_name, driver, results_stem  # noqa: E402
from coopnn.bench.measure import Budget, measure_batch  # noqa: E402
from coopnn.bench.models import BenchModel  # noqa: E402
from coopnn.bench.report import save  # noqa: E402
from coopnn.bench.runners import CoopnnRunner  # noqa: E402
from coopnn.bench.torch_runners import TorchCudaGraphRunner, cuda_unavailable_reason  # noqa: E402
from coopnn.layouts.formats import weight_format  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def weight_bytes(runner: CoopnnRunner) -> int:
    """Bytes of the device weight buffer (matrices in the driver's layout, biases and scales)."""
    return len(runner.model._executable.binary.weight_image.data)


def measure(models, formats, batches, backend: str, budget: Budget, progress) -> list[dict]:
    rows = []
    for name in models:
        bench_model = BenchModel.load(ROOT / "models" / f"{name}.onnx")
        # a format that quantizes inputs (int8) is calibrated on other samples than those it is timed on
        calibration = bench_model.feeds(4096, seed=1)
        runners = {fmt: CoopnnRunner(bench_model, backend, fmt,
                                     calibration if weight_format(fmt).input_quantization else None)
                   for fmt in formats}
        baseline = None if cuda_unavailable_reason() else TorchCudaGraphRunner(bench_model)
        try:
            for batch in batches:
                feeds = bench_model.feeds(batch)
                row = {"model": name, "batch": batch, "formats": {}}
                for fmt, runner in runners.items():
                    timing = measure_batch(runner, feeds, budget)
                    row["formats"][fmt] = {"gpu_ms": timing.gpu_ms.median if timing.gpu_ms else None,
                                           "wall_ms": timing.host_ms.median, "weight_bytes": weight_bytes(runner)}
                    progress(f"{name} 2^{batch.bit_length() - 1} {fmt}: {timing.host_ms.median:.3f} ms wall")
                if baseline is not None:
                    timing = measure_batch(baseline, feeds, budget)
                    row["pytorch_fp16"] = {"gpu_ms": timing.gpu_ms.median, "wall_ms": timing.host_ms.median}
                rows.append(row)
        finally:
            for runner in runners.values():
                runner.close()
            if baseline is not None:
                baseline.close()
    return rows


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def markdown(document: dict) -> str:
    formats = document["formats"]
    lines = [f"# Weight formats on {document['backend']}: {document['device']} (driver {document['driver']}), "
             f"{document['date']}", "",
             "Median of timed runs; GPU ms from timestamp queries (PyTorch: CUDA events around its graph replay), "
             "wall ms host to host with float32 arrays. `x fp16`: time of float16 divided by the format's (above 1: "
             "faster than float16). Weight bytes: the device weight buffer.", "",
             "| model | batch | " + " | ".join(f"{f} GPU ms / wall ms / x fp16 (GPU)" for f in formats)
             + " | PyTorch fp16 GPU ms / wall ms |",
             "|---|---|" + "---|" * (len(formats) + 1)]
    for row in document["rows"]:
        base = row["formats"][formats[0]]["gpu_ms"]
        cells = []
        for f in formats:
            r = row["formats"][f]
            ratio = "—" if not (base and r["gpu_ms"]) else f"{base / r['gpu_ms']:.2f}"
            cells.append(f"{_ms(r['gpu_ms'])} / {_ms(r['wall_ms'])} / {ratio}")
        torch = row.get("pytorch_fp16")
        cells.append("—" if torch is None else f"{_ms(torch['gpu_ms'])} / {_ms(torch['wall_ms'])}")
        lines.append(f"| {row['model']} | 2^{row['batch'].bit_length() - 1} | " + " | ".join(cells) + " |")
    lines += ["", "| model | " + " | ".join(f"{f} weight bytes" for f in formats) + " |",
              "|---|" + "---|" * len(formats)]
    for name in dict.fromkeys(row["model"] for row in document["rows"]):
        row = next(r for r in document["rows"] if r["model"] == name)
        lines.append(f"| {name} | " + " | ".join(str(row["formats"][f]["weight_bytes"]) for f in formats) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="coopvec")
    p.add_argument("--formats", default="fp16,fp8_e4m3,fp8_e5m2,int8", help="comma-separated; the first is the base")
    p.add_argument("--batches", default="14,18,21", help="log2 batch sizes, comma-separated")
    p.add_argument("--models", default=",".join(BENCHMARK_MLPS))
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    formats, models = args.formats.split(","), args.models.split(",")
    batches = [1 << int(b) for b in args.batches.split(",")]
    environment = describe_environment()
    rows = measure(models, formats, batches, args.backend, Budget(), lambda line: print(line, file=sys.stderr))
    document = {"backend": args.backend, "formats": formats, "environment": environment,
                "device": device_name(environment), "driver": driver(environment), "date": environment["date"],
                "rows": rows}
    stem = Path(args.out) / f"{results_stem(environment)}-weight-formats"
    save(document, stem.with_suffix(".json"))
    text = markdown(document)
    stem.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
