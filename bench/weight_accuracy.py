"""Accuracy of every zoo model in each quantized or float16-arithmetic weight format against float32 onnxruntime.

    python3 bench/weight_accuracy.py [--batch 4096] [--formats fp16,fp8_e4m3,fp8_e5m2,int8,q8_0,q4_0]

Inputs uniform in [-1, 1] (seed 0). Each float format runs its float16 emulation (`run_fp16_emulation`: what the
numpy backend computes for fp8 and the portable shader reproduces, and for fp16 the oracle of the coopvec kernels);
the block formats (q8_0, q4_0) run float32 arithmetic on their decoded weights (`emulate_weights`: what the numpy
backend computes and the portable shader reproduces); int8 runs its integer arithmetic (`IntegerEmulation`, what the
numpy backend computes and the portable shader reproduces) with input scales measured on a separate calibration
batch of the same distribution (seed 1, 4096 samples). Prints a markdown table: per model and format, the largest
absolute error over every output, and that error relative to the largest |output| of float32 (the worse output of a
multi-output model).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

import coopnn  # noqa: E402
from coopnn.backends.auto_weights import default_calibration  # noqa: E402
from coopnn.backends.numpy.inference import run_graph  # noqa: E402
from coopnn.graph.ir import Graph  # noqa: E402
from coopnn.layouts.formats import weight_format  # noqa: E402
from coopnn.layouts.formats.calibration import calibrated  # noqa: E402
from coopnn.layouts.formats.emulation import emulate_weights, run_fp16_emulation  # noqa: E402
from coopnn.layouts.formats.integer import IntegerEmulation  # noqa: E402

CALIBRATION_SAMPLES = 4096


def emulate(graph: Graph, feeds: dict[str, np.ndarray], name: str) -> dict[str, np.ndarray]:
    """What format `name` computes for `feeds` (a format that quantizes inputs calibrated first)."""
    fmt = weight_format(name)
    if fmt.input_quantization is not None:
        fmt = calibrated(fmt, graph, default_calibration(graph, CALIBRATION_SAMPLES, seed=1))
        return IntegerEmulation(graph, fmt).run(feeds)
    if fmt.blocks is not None:
        return run_graph(emulate_weights(graph, fmt), feeds)
    return run_fp16_emulation(graph, feeds, fmt)


def errors(path: Path, formats: list[str], batch: int) -> list[tuple[float, float]]:
    import onnxruntime as ort

    with coopnn.load(path, backend="numpy") as model:
        graph = model.graph
    feeds = default_calibration(graph, batch, seed=0)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    reference = dict(zip(names, session.run(names, feeds)))
    row = []
    for name in formats:
        got = emulate(graph, feeds, name)
        worst_abs = worst_rel = 0.0
        for output, want in reference.items():
            if want.dtype == bool:
                continue
            error = float(np.abs(got[output].astype(np.float64) - want).max())
            worst_abs = max(worst_abs, error)
            worst_rel = max(worst_rel, error / max(float(np.abs(want).max()), 1e-30))
        row.append((worst_abs, worst_rel))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--formats", default="fp16,fp8_e4m3,fp8_e5m2,int8,q8_0,q4_0")
    args = parser.parse_args(argv)
    formats = args.formats.split(",")
    print("| model | " + " | ".join(f"{f} max abs / rel" for f in formats) + " |")
    print("|---|" + "---|" * len(formats))
    for path in sorted((ROOT / "models").glob("*.onnx")):
        cells = [f"{a:.2g} / {r:.2%}" for a, r in errors(path, formats, args.batch)]
        print(f"| {path.stem} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
