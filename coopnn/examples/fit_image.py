"""Learn an image: an MLP with a frequency encoding maps pixel coordinates to colours (`coopnn fit-image`).

By default it learns the photograph of Grace Hopper that ships with matplotlib (nothing is downloaded), centre-
cropped and box-filtered to 128 x 128, and shows loss and PSNR as it trains. It writes the reconstruction and the
target as PNG, a plot of PSNR against step, and the PSNR values as CSV: `python -m coopnn.examples.fit_image [IMAGE]
[--steps N] [--output-dir DIR]`. The defaults (2000 steps of 4096 samples) are sized for the numpy backend on a
CPU; `--backend coopvec --weights fp16` trains on the GPU, and `--backend portable` on any Vulkan device (on lavapipe
the slowest of the three, as it runs the GPU kernels on the CPU).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

import coopnn
from coopnn.cli_format import HelpFormatter
from coopnn.examples.images import default_image_path, plot, read_image, write_png
from coopnn.layouts.formats import format_names


@dataclass(frozen=True)
class FitImageResult:
    psnr: list[tuple[int, float]]  # (step, PSNR in dB of the whole image) at every evaluation
    reconstruction: Path
    target: Path
    plot: Path
    table: Path
    seconds: float

    @property
    def final_psnr(self) -> float:
        return self.psnr[-1][1]


def square(image: np.ndarray, size: int) -> np.ndarray:
    """The centre square of `image` box-filtered by a whole factor to the smallest side of at least `size` pixels
    (kept as is when already smaller)."""
    side = min(image.shape[:2])
    factor = max(side // size, 1)
    side = side // factor * factor
    top, left = (image.shape[0] - side) // 2, (image.shape[1] - side) // 2
    crop = image[top:top + side, left:left + side]
    n = side // factor
    return crop.reshape(n, factor, n, factor, -1).mean(axis=(1, 3)).astype(np.float32)


def pixel_centres(size: int) -> np.ndarray:
    """The [size * size, 2] (row, column) coordinates of the pixel centres in [0, 1], row by row."""
    axis = (np.arange(size, dtype=np.float32) + 0.5) / size
    rows, columns = np.meshgrid(axis, axis, indexing="ij")
    return np.stack([rows.ravel(), columns.ravel()], axis=1)


def psnr(reconstruction: np.ndarray, target: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB of images in [0, 1]."""
    mse = float(np.mean(np.square(np.clip(reconstruction, 0, 1) - target), dtype=np.float64))
    return 10 * math.log10(1 / mse) if mse > 0 else math.inf


def fit_image(image: str | os.PathLike | None = None, *, size: int = 128, steps: int = 2000,
              batch_size: int = 4096, hidden: Sequence[int] = (64, 64, 64), octaves: int = 8, lr: float = 1e-2,
              eval_every: int = 50, backend: str = "numpy", weights: str = "fp32", seed: int = 0,
              output_dir: str | os.PathLike = "fit_image", progress: bool = True,
              export_shader: str | os.PathLike | None = None) -> FitImageResult:
    """Train an MLP on `image` (default: matplotlib's sample photograph) and write what it learnt to `output_dir`."""
    started = time.monotonic()
    target = square(read_image(default_image_path() if image is None else image), size)
    side = target.shape[0]
    coordinates, colours = pixel_centres(side), target.reshape(-1, 3)
    model = coopnn.mlp(2, hidden, 3, encoding="frequency", octaves=octaves, seed=seed, backend=backend,
                       weights=weights)
    trainer = coopnn.Trainer(model, "l2", coopnn.optim.Adam(lr=lr, betas=(0.9, 0.99)), seed=seed)
    history: list[tuple[int, float]] = []

    def evaluate(step: int, loss: float) -> str:
        if step % eval_every == 0 or step == steps:
            history.append((step, psnr(model.run(coordinates), colours)))
        return f"psnr {history[-1][1]:.2f} dB" if history else ""

    evaluate(0, math.nan)
    # Runs of steps end at every evaluation, so that each one sees the weights of its own step.
    trainer.fit(coordinates, colours, steps=steps, batch_size=batch_size, progress=progress, on_step=evaluate,
                read_every=eval_every)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = FitImageResult(history, out / "reconstruction.png", out / "target.png", out / "psnr.png",
                            out / "psnr.csv", time.monotonic() - started)
    write_png(result.reconstruction, model.run(coordinates).reshape(side, side, 3))
    write_png(result.target, target)
    if export_shader is not None:  # the trained network as a shader include, drawn by a fragment shader
        from coopnn.export.render import draw_export

        write_png(out / "exported_shader.png", draw_export(model, export_shader, side))
    steps_done, values = zip(*history)
    plot(result.plot, steps_done, values, xlabel="step", ylabel="PSNR (dB)",
         title=f"{side}x{side} image, {octaves} octaves, MLP {list(hidden)}")
    result.table.write_text("step,psnr_db\n" + "".join(f"{s},{v:.4f}\n" for s, v in history))
    return result


def positive(text: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above zero")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The example's options, shared by `python -m coopnn.examples.fit_image` and `coopnn fit-image`."""
    parser.add_argument("image", nargs="?", default=None, help="image file (default: matplotlib's grace_hopper.jpg)")
    parser.add_argument("--size", type=positive, default=128,
                        help="side of the square learnt: the image's centre square box-filtered by a whole factor to "
                             "the smallest side of at least SIZE (for the default image's 512: 512, 256, 170, 128, "
                             "102, 85, ...), kept whole when SIZE is larger")
    parser.add_argument("--steps", type=positive, default=2000, help="training steps")
    parser.add_argument("--batch-size", type=positive, default=4096, help="pixels per step")
    parser.add_argument("--hidden", type=positive, nargs="+", default=[64, 64, 64], help="hidden layer widths")
    parser.add_argument("--octaves", type=int, default=8, help="octaves of the frequency encoding")
    parser.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate")
    parser.add_argument("--eval-every", type=positive, default=50, help="steps between PSNR evaluations")
    parser.add_argument("--backend", "-b", default="numpy", choices=coopnn.backends.training_backends(),
                        help="backend that trains and runs the model")
    parser.add_argument("--weights", default="fp32", choices=format_names(),
                        help="weight format the model runs with (fp16 for the coopvec backend, which trains on GPU)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial weights and the batches")
    parser.add_argument("--output-dir", "-o", default="fit_image", help="folder for the PNGs and the PSNR table")
    parser.add_argument("--export-shader", metavar="DIR", default=None,
                        help="also export the network as a GLSL include into DIR and write exported_shader.png, its "
                             "draw by a fragment shader on the Vulkan device")


def run(args: argparse.Namespace) -> int:
    result = fit_image(args.image, size=args.size, steps=args.steps, batch_size=args.batch_size, hidden=args.hidden,
                       octaves=args.octaves, lr=args.lr, eval_every=args.eval_every, backend=args.backend,
                       weights=args.weights, seed=args.seed, output_dir=args.output_dir,
                       export_shader=args.export_shader)
    print(f"PSNR {result.final_psnr:.2f} dB after {result.psnr[-1][0]} steps ({result.seconds:.1f} s); wrote "
          f"{result.reconstruction}, {result.target}, {result.plot}, {result.table}"
          + (f"; exported the network to {args.export_shader} and drew it into exported_shader.png"
             if args.export_shader else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coopnn.examples.fit_image", description=__doc__.split("\n")[0],
                                     formatter_class=HelpFormatter)
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except coopnn.CoopnnError as e:
        print(f"coopnn: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
