"""What the GPU's driver made of coopnn's kernels for the three benchmark MLPs: registers, spilled bytes, workgroup
memory and whatever else it reports (VK_KHR_pipeline_executable_properties, `coopnn.runtime.kernel_statistics`), for
inference on every GPU backend that runs them and for the kernels of a coopvec training step (per-sample and tiled
step kernels), in one Markdown file.

    python3 bench/kernel_statistics.py [--out bench/results]

Writes `<out>/<device>-<date>-kernel-statistics.md`. Nothing is timed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

import coopnn  # noqa: E402
from coopnn.bench.environment import describe_environment, device_name, driver, results_stem  # noqa: E402
from coopnn.errors import CoopnnError  # noqa: E402
from coopnn.runtime.kernel_statistics import statistics_table  # noqa: E402

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
INFERENCE_BACKENDS = ("coopvec", "coopmat2", "coopmat", "portable")
STEP_METHODS = ("coopvec", "tiled")


def sections() -> list[str]:
    out = []
    for name in MODELS:
        path = ROOT / "models" / f"{name}.onnx"
        inference = []
        for backend in INFERENCE_BACKENDS:
            try:
                with coopnn.load(path, backend=backend, weights="fp16" if backend != "portable" else "fp32") as model:
                    inference += [dataclasses.replace(k, kernel=backend) for k in model.kernel_statistics()]
            except CoopnnError as error:
                out.append(f"- {name} on {backend}: not reported ({error})")
        if inference:
            out += [f"## {name}: inference (one kernel per backend)", "", statistics_table(inference)]
        for step in STEP_METHODS:
            try:
                with coopnn.load(path, backend="coopvec", weights="fp16") as model:
                    trainer = coopnn.Trainer(model, "l2", "adam", step=step)
                    out += [f"## {name}: a coopvec training step, step={step!r} (L2, Adam)", "",
                            statistics_table(trainer.kernel_statistics())]
            except CoopnnError as error:
                out.append(f"- {name}, training step={step!r}: not reported ({error})")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"), help="directory for the Markdown file")
    args = parser.parse_args()
    environment = describe_environment()
    body = sections()
    title = (f"# Kernel statistics: {device_name(environment)} (driver {driver(environment)}), "
             f"{environment['date'][:10]}")
    text = "\n".join([title, "", "Reported by the driver through VK_KHR_pipeline_executable_properties "
                      "(`python3 bench/kernel_statistics.py`); the statistics' names and descriptions are the "
                      "driver's.", "", *body])
    path = Path(args.out) / f"{results_stem(environment)}-kernel-statistics.md"
    path.write_text(text)
    print(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
