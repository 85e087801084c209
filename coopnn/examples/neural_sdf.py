"""Learn a signed distance function and render it: `python -m coopnn.examples.neural_sdf [--steps N] [-o DIR]`.

A 3-D hash grid and a 64-wide MLP (a tiny-cuda-nn config: HashGrid, 2 features a level, L1 loss, Adam with tcnn's
settings) are fitted to the shape of `coopnn.examples.sdf_shapes`, made in code, from points drawn around its
surface; the fit shows a progress bar. The learnt field is then sphere traced (`coopnn.examples.sphere_trace`) with
coopnn inference, one `model.run` per iteration over the rays still marching, and shaded from normals by finite
differences. It writes `neural_sdf.png`, `reference.png` (the analytic shape through the same renderer) and
`comparison.png` (reference left, learnt right).

With a GPU the model trains on the first backend that trains grids there (coopvec, else portable) and renders on
the fastest one (`backend="auto"`); without one, numpy does both, at the smaller `--preset cpu` sizes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

import coopnn
from coopnn import backends
from coopnn.cli_format import HelpFormatter
from coopnn.errors import CoopnnError, InputError
from coopnn.examples.fit_image import positive
from coopnn.examples.images import write_png
from coopnn.examples.sdf_shapes import scene, training_points
from coopnn.examples.sphere_trace import Camera, render
from coopnn.model import prepare

GPU_TRAINING = ("coopvec", "portable")  # tried in this order where the device is a GPU


@dataclass(frozen=True)
class Preset:
    levels: int
    log2_table: int
    base_resolution: int
    per_level_scale: float
    points: int  # training points drawn once
    batch: int
    steps: int
    side: int  # pixels of the square render


PRESETS = {
    "gpu": Preset(16, 19, 16, 1.38, 1 << 20, 1 << 18, 2000, 512),
    "cpu": Preset(8, 14, 8, 1.5, 1 << 15, 1 << 12, 300, 160),
}


def sdf_config(preset: Preset) -> dict:
    """The tiny-cuda-nn config of the field: grid from `preset`, 64 x 2 ReLU MLP, L1, Adam as tcnn's samples."""
    return {"loss": {"otype": "L1"},
            "optimizer": {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-15,
                          "l2_reg": 1e-6},
            "encoding": {"otype": "HashGrid", "n_levels": preset.levels, "n_features_per_level": 2,
                         "log2_hashmap_size": preset.log2_table, "base_resolution": preset.base_resolution,
                         "per_level_scale": preset.per_level_scale},
            "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None",
                        "n_neurons": 64, "n_hidden_layers": 2}}


def has_gpu() -> bool:
    """Whether the Vulkan device coopnn would use is a GPU (not a CPU implementation such as lavapipe)."""
    from coopnn.runtime.executable import chosen_device

    try:
        return chosen_device(None).device_type != "cpu"
    except CoopnnError:
        return False


def trainer_for(config: dict, backend: str, seed: int) -> tuple[str, coopnn.Model, coopnn.Trainer]:
    """(backend, model, trainer) on `backend`, or with "auto" on the first of GPU_TRAINING that trains the model here
    (numpy without a GPU); each in the first weight format it takes (coopvec's float16: it refuses float32)."""
    candidates = ([backend] if backend != "auto" else list(GPU_TRAINING) if has_gpu() else []) + ["numpy"]
    refusals = []
    for name in dict.fromkeys(candidates):
        try:
            weights = coopnn.backends.training_backend(name).formats[0].name
            return (name, *coopnn.from_tcnn_config(config, 3, 1, seed=seed, backend=name, weights=weights))
        except CoopnnError as e:
            if backend != "auto":
                raise
            refusals.append(f"{name}: {str(e).splitlines()[0]}")
    raise CoopnnError("no backend trains the SDF model: " + "; ".join(refusals))


def to_grid(points: np.ndarray) -> np.ndarray:
    """Points of the cube [-1, 1]^3 as the grid's inputs in [0, 1]^3."""
    return ((points + 1) * 0.5).astype(np.float32)


@dataclass(frozen=True)
class NeuralSdfResult:
    image: Path
    reference: Path
    comparison: Path
    train_backend: str
    render_backend: str
    final_loss: float
    silhouette_iou: float  # of the learnt render's hit mask against the analytic one's
    seconds: float


def chosen_preset(preset: str | None, steps: int | None, batch_size: int | None, side: int | None) -> Preset:
    """`preset` (by default the one for this machine) with the sizes given replacing its own; InputError naming a
    preset or size it cannot take."""
    if preset is not None and preset not in PRESETS:
        raise InputError(f"preset {preset!r} is not one of {', '.join(sorted(PRESETS))}")
    sizes = {"steps": steps, "batch": batch_size, "side": side}
    for key, value in sizes.items():
        low = 0 if key == "steps" else 1
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise InputError(f"{'batch_size' if key == 'batch' else key} must be a whole number >= {low}, "
                             f"not {value!r}")
    return replace(PRESETS[preset or ("gpu" if has_gpu() else "cpu")],
                   **{k: v for k, v in sizes.items() if v is not None})


def output_folder(output_dir: str | os.PathLike) -> Path:
    """`output_dir`, made where it is missing (before the fit, so that a path it cannot be fails at once)."""
    out = Path(output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CoopnnError(f"cannot write the PNGs to {str(out)!r}: {e.strerror or e}") from None
    return out


def neural_sdf(*, preset: str | None = None, steps: int | None = None, batch_size: int | None = None,
               side: int | None = None, backend: str = "auto", train_backend: str = "auto", seed: int = 0,
               output_dir: str | os.PathLike = "neural_sdf", progress: bool = True) -> NeuralSdfResult:
    """Fit the field, render it and the analytic shape, write the PNGs to `output_dir`. `preset` ("gpu" or "cpu",
    by default the one for this machine) sizes the grid, the data, the fit and the render; `steps`, `batch_size` and
    `side` replace its values."""
    started = time.monotonic()
    chosen = chosen_preset(preset, steps, batch_size, side)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 32:
        raise InputError(f"seed must be a whole number from 0 to 2^32 - 1, not {seed!r}")
    if backend != "auto":
        backends.get(backend)  # an unknown one is refused before the fit, not after it
    out = output_folder(output_dir)
    trained_on, model, trainer = trainer_for(sdf_config(chosen), train_backend, seed)
    points = training_points(chosen.points, seed)
    camera = Camera(side=chosen.side)
    with model:  # closed however the fit or the render ends
        with trainer:
            losses = trainer.fit(to_grid(points), scene(points)[:, None], steps=chosen.steps,
                                 batch_size=chosen.batch, progress=progress)
        with prepare(model.graph, backend=backend, weights="auto") as runner:
            image, hit = render(lambda p: runner.run(to_grid(p))[:, 0], camera, progress=progress)
    reference, expected = render(scene, camera)
    paths = out / "neural_sdf.png", out / "reference.png", out / "comparison.png"
    write_png(paths[0], image)
    write_png(paths[1], reference)
    gap = np.ones((chosen.side, max(chosen.side // 32, 2), 3), np.float32)
    write_png(paths[2], np.concatenate([reference, gap, image], axis=1))
    iou = float((hit & expected).sum() / max((hit | expected).sum(), 1))
    return NeuralSdfResult(*paths, trained_on, runner.backend, float(losses[-1]) if len(losses) else float("nan"),
                           iou, time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coopnn.examples.neural_sdf", description=__doc__.split("\n")[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                        help="sizes of grid, data, fit and render (default: gpu with a GPU, else cpu)")
    parser.add_argument("--steps", type=positive, default=None, help="training steps (gpu 2000, cpu 300)")
    parser.add_argument("--batch-size", type=positive, default=None, help="points per step (gpu 2^18, cpu 2^12)")
    parser.add_argument("--side", type=positive, default=None, help="pixels of the square render (gpu 512, cpu 160)")
    parser.add_argument("--backend", "-b", default="auto", help="backend that renders (runs the model)")
    parser.add_argument("--train-backend", default="auto",
                        help="backend that trains (default: coopvec, else portable on a GPU; numpy otherwise)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial weights, points and batches")
    parser.add_argument("--output-dir", "-o", default="neural_sdf", help="folder for the PNGs")
    args = parser.parse_args(argv)
    try:
        result = neural_sdf(preset=args.preset, steps=args.steps, batch_size=args.batch_size, side=args.side,
                            backend=args.backend, train_backend=args.train_backend, seed=args.seed,
                            output_dir=args.output_dir)
    except CoopnnError as e:
        print(f"coopnn: error: {e}", file=sys.stderr)
        return 1
    print(f"trained on {result.train_backend} (final loss {result.final_loss:.4g}), rendered on "
          f"{result.render_backend}; silhouette IoU against the analytic shape {result.silhouette_iou:.3f} "
          f"({result.seconds:.1f} s); wrote {result.image}, {result.reference}, {result.comparison}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
