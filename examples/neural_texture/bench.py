"""Times an exported network in a compute shader, both variants, both languages: the median GPU time of evaluating
`--rows` rows through `coopnn.export.compute.ComputeHarness` for a frequency-encoded MLP and a hash-grid one, as an
engine would pay for them in its own shaders. Prints a Markdown table and writes it to `--output`.

    python examples/neural_texture/bench.py --rows 1048576 --output bench/results/DEVICE-shader-export.md
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import numpy as np

import coopnn
from coopnn.export.compute import ComputeHarness
from coopnn.export.render import COOPVEC_FEATURES
from coopnn.runtime.vk.context import VulkanContext

MODELS = {
    "frequency 8 octaves, MLP 64x3": dict(encoding="frequency", octaves=8, hidden=[64, 64, 64]),
    "hash grid 16x2, MLP 64x2": dict(encoding={"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2,
                                               "log2_hashmap_size": 19, "base_resolution": 16},
                                     hidden=[64, 64]),
}


def _context() -> tuple[VulkanContext, tuple[str, ...]]:
    """A context with cooperative vectors where the device has them, and the variants it runs."""
    try:
        return VulkanContext(features=COOPVEC_FEATURES), ("portable", "coopvec")
    except coopnn.CoopnnError:
        return VulkanContext(), ("portable",)


def _time(context, manifest: Path, variant: str, inputs: np.ndarray, repeats: int) -> float:
    with ComputeHarness(context, manifest, variant, len(inputs)) as harness:
        harness.run(inputs)  # the first run pays for the pipeline and the copies' first touches
        times = []
        for _ in range(repeats):
            harness.run(inputs)
            times.append(harness.last_gpu_ms)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1 << 20, help="rows a dispatch evaluates")
    parser.add_argument("--repeats", type=int, default=20, help="timed dispatches per case")
    parser.add_argument("--output", type=Path, default=None, help="Markdown file for the table")
    args = parser.parse_args()
    inputs = np.random.default_rng(0).uniform(0, 1, (args.rows, 2)).astype(np.float32)
    context, variants = _context()
    lines = [f"Exported shader, compute harness, {args.rows} rows, median of {args.repeats} dispatches on "
             f"{context.info.name}", "", "| model | language | variant | GPU ms | ns per row |", "| --- | --- | --- | "
             "--- | --- |"]
    with context, tempfile.TemporaryDirectory() as scratch:
        for index, (label, options) in enumerate(MODELS.items()):
            model = coopnn.mlp(2, options["hidden"], 3, encoding=options["encoding"], octaves=options.get("octaves"),
                               output_activation="sigmoid", backend="numpy")
            for lang in ("glsl", "slang"):
                exported = model.export_shader(Path(scratch) / f"{index}-{lang}", lang=lang, name="bench")
                for variant in variants:
                    ms = _time(context, exported.manifest, variant, inputs, args.repeats)
                    lines.append(f"| {label} | {lang} | {variant} | {ms:.3f} | {ms * 1e6 / args.rows:.2f} |")
                    print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output is not None:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
