"""Learn an image: an encoding and an MLP map pixel coordinates to colours (`coopnn fit-image`).

`--encoding frequency` (the default) learns the photograph of Grace Hopper that ships with matplotlib (nothing is
downloaded), centre-cropped and box-filtered to 128 x 128; `--encoding hashgrid` trains tiny-cuda-nn's image
configuration (a hash grid, `coopnn.examples.image_models`) on the 1024 x 1024 Mona Lisa that slangpy ships, at full
resolution, with batches of 2^18 pixels as tcnn's image sample (2^14 on the numpy backend); `--encoding CONFIG.json`
a tcnn config of your own. It shows loss and PSNR as it trains and writes the reconstruction and the target as PNG,
a full-resolution crop of both side by side, a plot of PSNR against step, and the PSNR values as CSV: `python -m
coopnn.examples.fit_image [IMAGE] [--encoding E] [--steps N] [--output-dir DIR]`. The frequency defaults (2000 steps
of 4096 samples) are sized for the numpy backend on a CPU; `--backend coopvec --weights fp16` trains on the GPU, and
`--backend portable` on any Vulkan device (on lavapipe the slowest of the three, as it runs the GPU kernels on the
CPU). `--export-shader DIR` also exports the trained network as a shader include and draws it.
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
from coopnn.examples.image_models import image_model, megapixel_image_path
from coopnn.examples.images import default_image_path, plot, read_image, write_png
from coopnn.layouts.formats import format_names


@dataclass(frozen=True)
class FitImageResult:
    psnr: list[tuple[int, float]]  # (step, PSNR in dB of the whole image) at every evaluation
    reconstruction: Path
    target: Path
    plot: Path
    table: Path
    crop: Path  # target (left) and reconstruction (right) of the centre at full resolution
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


CROP = 256  # side of the full-resolution crop


def fit_image(image: str | os.PathLike | None = None, *, size: int | None = None, steps: int = 2000,
              batch_size: int | None = None, hidden: Sequence[int] = (64, 64, 64), octaves: int = 8,
              lr: float | None = None, eval_every: int = 50, backend: str = "numpy", weights: str = "fp32",
              seed: int = 0, output_dir: str | os.PathLike = "fit_image", progress: bool = True,
              encoding: str = "frequency", export_shader: str | os.PathLike | None = None) -> FitImageResult:
    """Train a model (`encoding`: frequency, hashgrid or a tcnn JSON config) on `image` and write what it learnt to
    `output_dir`. Defaults that depend on the encoding: the image (matplotlib's photograph, or slangpy's 1024 x 1024
    one for tcnn configs), `size` (128, or the whole image), `batch_size` (4096, or tcnn's 2^18, 2^14 on numpy) and
    `lr` (1e-2, or the config's). `export_shader`: a folder to export the trained network to as a shader include,
    drawn by a fragment shader into `exported_shader.png`."""
    started = time.monotonic()
    made = image_model(encoding, hidden=hidden, octaves=octaves, lr=lr, seed=seed, backend=backend, weights=weights)
    if image is None:
        image = megapixel_image_path() if made.tcnn else default_image_path()
    pixels = read_image(image)
    target = square(pixels, size if size is not None else (min(pixels.shape[:2]) if made.tcnn else 128))
    if batch_size is None:  # tcnn's image sample takes 2^18; the numpy backend takes a minute a step at that
        batch_size = (1 << 14 if backend == "numpy" else 1 << 18) if made.tcnn else 4096
    side = target.shape[0]
    coordinates, colours = pixel_centres(side), target.reshape(-1, 3)
    model, trainer = made.model, made.trainer
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
                            out / "psnr.csv", out / "crop.png", time.monotonic() - started)
    reconstruction = model.run(coordinates).reshape(side, side, 3)
    write_png(result.reconstruction, reconstruction)
    write_png(result.target, target)
    write_png(result.crop, side_by_side(target, reconstruction, CROP))
    if export_shader is not None:  # the trained network as a shader include, drawn by a fragment shader
        from coopnn.export.render import draw_export

        write_png(out / "exported_shader.png", draw_export(model, export_shader, side))
    steps_done, values = zip(*history)
    plot(result.plot, steps_done, values, xlabel="step", ylabel="PSNR (dB)",
         title=f"{side}x{side} image, {made.title}")
    result.table.write_text("step,psnr_db\n" + "".join(f"{s},{v:.4f}\n" for s, v in history))
    trainer.close()
    return result


def side_by_side(target: np.ndarray, reconstruction: np.ndarray, side: int) -> np.ndarray:
    """The centre `side` x `side` pixels (or the whole image, if smaller) of both, target left, a white gap."""
    side = min(side, target.shape[0])
    top = (target.shape[0] - side) // 2
    window = (slice(top, top + side), slice(top, top + side))
    gap = np.ones((side, max(side // 32, 2), 3), np.float32)
    return np.concatenate([target[window], gap, np.clip(reconstruction[window], 0, 1)], axis=1)


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
    parser.add_argument("image", nargs="?", default=None,
                        help="image file (default: matplotlib's grace_hopper.jpg; for tcnn configs slangpy's "
                             "1024x1024 monalisa.jpg)")
    parser.add_argument("--encoding", "-e", default="frequency",
                        help="frequency (coopnn's frequency encoding), hashgrid (tiny-cuda-nn's image config: "
                             "HashGrid 16x2, 2^15 entries a level, MLP 64x2, RelativeL2, Adam) or a tiny-cuda-nn "
                             "JSON config file")
    parser.add_argument("--size", type=positive, default=None,
                        help="side of the square learnt: the image's centre square box-filtered by a whole factor to "
                             "the smallest side of at least SIZE (for the default image's 512: 512, 256, 170, 128, "
                             "102, 85, ...), kept whole when SIZE is larger (default 128; tcnn configs: the whole "
                             "image)")
    parser.add_argument("--steps", type=positive, default=2000, help="training steps")
    parser.add_argument("--batch-size", type=positive, default=None,
                        help="pixels per step (default 4096; tcnn configs: 2^18, 2^14 on the numpy backend)")
    parser.add_argument("--hidden", type=positive, nargs="+", default=[64, 64, 64], help="hidden layer widths")
    parser.add_argument("--octaves", type=int, default=8, help="octaves of the frequency encoding")
    parser.add_argument("--lr", type=float, default=None,
                        help="Adam learning rate (default 1e-2, a tcnn config's own)")
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
                       weights=args.weights, seed=args.seed, output_dir=args.output_dir, encoding=args.encoding,
                       export_shader=args.export_shader)
    print(f"PSNR {result.final_psnr:.2f} dB after {result.psnr[-1][0]} steps ({result.seconds:.1f} s); wrote "
          f"{result.reconstruction}, {result.target}, {result.crop}, {result.plot}, {result.table}"
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
