"""End-to-end `Model.run` against PyTorch, and the copy floor, on the GPU machine (`coopnn.bench.end_to_end`).

    python3 bench/host_path.py [--models a,b] [--batches 10,14,18,21] [--backend auto] [--no-torch] [--out DIR]

Writes `<device>-<date>-host-path.{json,md}` (default into bench/results/); prints the markdown. `bench/run.py` runs
the same measurement after its suite.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

from coopnn.bench import end_to_end  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(end_to_end.MODELS))
    parser.add_argument("--batches", default="10,14,18,21", help="log2 of the batch sizes")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--backend", default="auto", help="a Vulkan backend, or auto")
    parser.add_argument("--no-torch", action="store_true", help="leave out PyTorch and CUDA tensors")
    args = parser.parse_args(argv)
    paths = [ROOT / "models" / f"{name}.onnx" for name in args.models.split(",")]
    document = end_to_end.measure(paths, [int(b) for b in args.batches.split(",")], args.backend,
                                  torch=not args.no_torch)
    print(end_to_end.write(document, Path(args.out)).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
