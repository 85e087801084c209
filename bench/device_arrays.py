"""`run()` on `coopnn.to_device` arrays against numpy, with the variants that isolate a slow run
(`coopnn.bench.device_arrays`), on every benchmark MLP at 2^21 by default.

    python3 bench/device_arrays.py [--models a,b] [--batches 21] [--backend auto] [--runs 15] [--out DIR]

Writes `<device>-<date>-device-arrays.{json,md}` (default into bench/results/); prints the markdown.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

from coopnn.bench import device_arrays  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(device_arrays.MODELS))
    parser.add_argument("--batches", default="21", help="log2 of the batch sizes")
    parser.add_argument("--backend", default="auto", help="a Vulkan backend, or auto")
    parser.add_argument("--runs", type=int, default=device_arrays.RUNS)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    paths = [ROOT / "models" / f"{name}.onnx" for name in args.models.split(",")]
    document = device_arrays.measure(paths, [int(b) for b in args.batches.split(",")], args.runs, args.backend)
    print(device_arrays.write(document, Path(args.out)).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
