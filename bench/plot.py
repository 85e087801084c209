"""Draws the throughput PNG of a saved results file (for machines where matplotlib was missing at run time).

    python3 bench/plot.py bench/results/nvidia-h100-80gb-hbm3-2026-11-22.json [--out plot.png]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing coopnn

from coopnn.bench.plot import plot_throughput, plot_unavailable_reason  # noqa: E402
from coopnn.bench.report import load  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Plot samples/s against batch size from a bench/run.py results file.")
    p.add_argument("results", type=Path, help="a results .json written by bench/run.py or `coopnn bench --json`")
    p.add_argument("--out", type=Path, help="the PNG to write (default: next to the results, with .png)")
    args = p.parse_args(argv)
    why = plot_unavailable_reason()
    if why:
        print(f"bench/plot.py: {why}", file=sys.stderr)
        return 1
    try:
        document = load(args.results)
    except (OSError, ValueError) as e:
        print(f"bench/plot.py: cannot read {args.results}: {e}", file=sys.stderr)
        return 1
    print(f"wrote {plot_throughput(document, args.out or args.results.with_suffix('.png'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
