"""The coopvec inference kernel by workgroup size, float32 and float16 rows, on device arrays
(`coopnn.bench.inference_variants`).

    python3 bench/inference_variants.py [--models a,b] [--batches 18,21] [--sizes 32,64,128,256] [--rounds 20]
                                        [--out DIR]

Writes `<device>-<date>-inference-variants.{json,md}` (default into bench/results/); prints the markdown.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

from coopnn.bench import inference_variants  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(inference_variants.MODELS))
    parser.add_argument("--batches", default="18,21", help="log2 of the batch sizes")
    parser.add_argument("--sizes", default=",".join(map(str, inference_variants.WORKGROUP_SIZES)))
    parser.add_argument("--rounds", type=int, default=inference_variants.ROUNDS)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    paths = [ROOT / "models" / f"{name}.onnx" for name in args.models.split(",")]
    document = inference_variants.measure(paths, [int(b) for b in args.batches.split(",")],
                                          tuple(int(s) for s in args.sizes.split(",")), args.rounds)
    print(inference_variants.write(document, Path(args.out)).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
