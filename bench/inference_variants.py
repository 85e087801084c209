"""The coopvec inference kernel by workgroup size and row staging (`coopnn.bench.inference_variants`), float32 and
float16 rows on device arrays, the three benchmark MLPs and tiny-cuda-nn's image configuration.

    python3 bench/inference_variants.py [--models a,b] [--batches 10,14,18,21] [--io f32,f16]
                                        [--variants shipped,staged,...] [--rounds 9] [--statistics] [--out DIR]

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
    parser.add_argument("--batches", default=",".join(map(str, inference_variants.LOG2_BATCHES)),
                        help="log2 of the batch sizes")
    parser.add_argument("--io", default=",".join(inference_variants.IO_DTYPES))
    parser.add_argument("--variants", default=",".join(inference_variants.VARIANTS))
    parser.add_argument("--rounds", type=int, default=inference_variants.ROUNDS)
    parser.add_argument("--statistics", action="store_true",
                        help="also the driver's statistics of every kernel (registers, spills)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    unknown = sorted(set(args.variants.split(",")) - set(inference_variants.VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; there are {sorted(inference_variants.VARIANTS)}")
    variants = {name: inference_variants.VARIANTS[name] for name in args.variants.split(",")}
    document = inference_variants.measure(args.models.split(","), [int(b) for b in args.batches.split(",")],
                                          variants, args.rounds, tuple(args.io.split(",")),
                                          statistics=args.statistics)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(inference_variants.write(document, out).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
