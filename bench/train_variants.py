"""The coopvec training step's kernels by tuning: the tiled step kernel and the cooperative-matrix products timed
apart across their knobs (`coopnn.bench.training_variants`, `coopnn.shaders.training.tuning`).

    python3 bench/train_variants.py [--models a,b] [--batches 16,18] [--rounds 15] [--only "subgroups=4,chunk"]
                                    [--budget SECONDS] [--out DIR]

Writes `<device>-<date>-train-variants.{json,md}` (default into bench/results/) after each model; prints a line a
variant as it goes and the markdown at the end. A variant that fails to build, run or match the default is listed
with why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

from coopnn.bench import training_variants, training_variants_report  # noqa: E402
from coopnn.shaders.training.tuning import DEFAULT  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(training_variants.MODELS),
                        help="in the order they run (results are written after each)")
    parser.add_argument("--batches", default="18,16", help="log2 of the batch sizes")
    parser.add_argument("--rounds", type=int, default=training_variants.ROUNDS)
    parser.add_argument("--budget", type=float, help="seconds after which no further model is started")
    parser.add_argument("--only", help="only variants whose description contains one of these (comma-separated); "
                                       "the default always runs")
    parser.add_argument("--list", action="store_true", help="print the variants and stop")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    tunings = training_variants.variants()
    if args.only:
        wanted = args.only.split(",")
        tunings = [t for t in tunings if t == DEFAULT or any(w in t.describe() for w in wanted)]
    if args.list:
        print("\n".join(t.describe() for t in tunings))
        return 0
    paths = [ROOT / "models" / f"{name}.onnx" for name in args.models.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    document = training_variants.measure(paths, [int(b) for b in args.batches.split(",")], tunings, args.rounds,
                                         log=lambda line: print(line, flush=True), out=out, budget=args.budget)
    print(training_variants_report.write(document, out).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
