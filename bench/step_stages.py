"""Where a coopnn training step's GPU time goes: each command of one step timed alone next to the whole step
(`coopnn.bench.step_stages`), for tiny-cuda-nn's image configuration and the benchmark MLPs, with any trainer
options.

    python3 bench/step_stages.py [--models hashgrid_image,mlp_32_64x4_16] [--batches 16,18]
                                 [--backend coopvec] [--options gradients=coopvec table_atomics=float32 ...] [--out DIR]

Each `--options` word is one variant: trainer options as `key=value` pairs joined by commas ("default" for none), or
`tuning:knob=value,...` for the coopvec session's `Tuning` (`coopnn.shaders.training.tuning`) in place of the one
`tuning_for` picks, or both joined by "+" (`step=coopvec_rows+tuning:deltas=samples`). Writes
`<device>-<date>-step-stages.md` into --out (default: print only).
"""

from __future__ import annotations

import argparse
import sys
from ast import literal_eval
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

import coopnn  # noqa: E402
from coopnn.backends.coopvec import training as coopvec_training  # noqa: E402
from coopnn.bench.environment import describe_environment, device_name, driver, results_stem  # noqa: E402
from coopnn.bench.image_config import WEIGHTS, made  # noqa: E402
from coopnn.bench.step_stages import markdown, stage_times  # noqa: E402
from coopnn.shaders.training.tuning import Tuning  # noqa: E402

WARMUP_STEPS = 30
# The data holds this many times the largest batch, so every step draws its batch at random as a fit over a larger
# dataset does (the image's 2^20 pixels at batches of 2^18), rather than reading all of it in order.
DRAWN_FROM = 4


def trainer_for(name: str, backend: str, options: dict):
    """The model and trainer of `name` ("hashgrid_image" or a zoo model) on `backend` with trainer `options`."""
    if name == "hashgrid_image":
        return made(backend, **options)
    model = coopnn.load(str(ROOT / "models" / f"{name}.onnx"), backend=backend, weights=WEIGHTS.get(backend, "fp32"))
    return model, coopnn.Trainer(model, "l2", "adam", **options)


def data_for(model, rows: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    n_in, n_out = model.graph.inputs[0].shape[1], model.graph.outputs[0].shape[1]
    return (rng.uniform(0, 1, (rows, n_in)).astype(np.float32), rng.uniform(0, 1, (rows, n_out)).astype(np.float32))


def parse_options(word: str) -> tuple[dict, Tuning | None]:
    """(trainer options, tuning or None) of one `--options` word: its parts joined by "+" each trainer options or a
    tuning."""
    options, tuning = {}, None
    for part in word.split("+"):
        if part == "default":
            continue
        if part.startswith("tuning:"):
            knobs = dict(pair.split("=", 1) for pair in part[len("tuning:"):].split(","))
            tuning = Tuning(**{k: _knob_value(v) for k, v in knobs.items()})
        else:
            options.update(pair.split("=", 1) for pair in part.split(","))
    return options, tuning


def _knob_value(text: str):
    """A knob's value: a Python literal (4, True, None), else the word itself ("samples")."""
    try:
        return literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def measure(name: str, backend: str, word: str, batches: list[int]) -> str:
    options, tuning = parse_options(word)
    with mock.patch.object(coopvec_training, "tuning_for", lambda shapes: tuning) if tuning else nullcontext():
        model, trainer = trainer_for(name, backend, options)
    out = []
    try:
        x, y = data_for(model, DRAWN_FROM * max(batches))
        for batch in batches:
            trainer.fit(x, y, steps=WARMUP_STEPS, batch_size=batch, progress=False)
            feeds, targets = trainer._data(x, y, on_device=True)
            data = trainer.session.upload_data(feeds, targets)
            try:
                rows = stage_times(trainer.session, data, batch)
            finally:
                data.close()
            out.append(markdown(f"{name}, batch 2^{batch.bit_length() - 1}, options: {word}", rows))
            print(out[-1], flush=True)
    finally:
        trainer.close()
        model.close()
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="hashgrid_image,mlp_32_64x4_16")
    p.add_argument("--batches", default="16,18", help="log2 of the batch sizes")
    p.add_argument("--backend", default="coopvec")
    p.add_argument("--options", nargs="+", default=["default"])
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    environment = describe_environment()
    batches = [1 << int(b) for b in args.batches.split(",")]
    sections = [measure(name, args.backend, word, batches) for name in args.models.split(",") for word in args.options]
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"{results_stem(environment)}-step-stages.md"
        header = (f"# Where a training step's GPU time goes, {device_name(environment)} (driver {driver(environment)})"
                  f"\n\nEach command of one step timed alone, median of 30 round-robin submissions "
                  f"(`bench/step_stages.py`), next to the whole step.\n\n")
        path.write_text(header + "\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
