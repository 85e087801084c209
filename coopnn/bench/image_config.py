"""Measuring tiny-cuda-nn's image configuration (`coopnn.examples.image_models.TCNN_IMAGE_CONFIG`: a 16-level hash
grid and a 64-wide MLP, RelativeL2, Adam) as `coopnn fit-image --encoding hashgrid` trains it: the GPU time of a
training step at a batch, the wall clock of whole fits and the PSNR they reach on an image, and the GPU time of
inference, for each coopnn backend that trains or runs the model here (`bench/hashgrid.py` drives it and writes the
report; the plain-PyTorch reference is `coopnn.examples.torch_image_reference`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import coopnn
from coopnn.bench.measure import Stats
from coopnn.errors import CoopnnError
from coopnn.examples.fit_image import pixel_centres, psnr, square
from coopnn.examples.image_models import TCNN_IMAGE_CONFIG
from coopnn.examples.images import read_image
from coopnn.nets.tcnn_config import network_layers

# The weight format each backend trains and runs the configuration in (float32 where not named): coopvec's products
# are float16, the others' float32.
WEIGHTS = {"coopvec": "fp16", "coopmat2": "fp16", "coopmat": "fp16"}


@dataclass(frozen=True)
class ImageData:
    coordinates: np.ndarray  # [side * side, 2] pixel centres in [0, 1]
    colours: np.ndarray  # [side * side, 3]
    side: int


def image_data(path: str, size: int | None = None) -> ImageData:
    """The centre square of the image at `path`, whole or box-filtered to `size` (as `fit_image` takes it)."""
    pixels = read_image(path)
    target = square(pixels, size if size is not None else min(pixels.shape[:2]))
    return ImageData(pixel_centres(target.shape[0]), target.reshape(-1, 3), target.shape[0])


def made(backend: str, seed: int = 0, **trainer_options: str) -> tuple[coopnn.Model, coopnn.Trainer]:
    """The configuration's model and trainer (with `trainer_options`) on `backend` in its weight format (CoopnnError
    where it cannot train it)."""
    return coopnn.from_tcnn_config(TCNN_IMAGE_CONFIG, 2, 3, seed=seed, backend=backend,
                                   weights=WEIGHTS.get(backend, "fp32"), **trainer_options)


def model_only(backend: str) -> coopnn.Model:
    """The configuration's model on `backend` for inference, no trainer (CoopnnError where it cannot run it)."""
    hidden, activation, output_activation = network_layers(TCNN_IMAGE_CONFIG["network"])
    return coopnn.mlp(2, hidden, 3, activation=activation, output_activation=output_activation,
                      encoding=TCNN_IMAGE_CONFIG["encoding"], backend=backend, weights=WEIGHTS.get(backend, "fp32"),
                      initialisation="xavier")


@dataclass
class Reason:
    """A measurement that did not happen, and why."""

    why: str


def step_gpu_ms(backend: str, data: ImageData, batches: list[int], steps: int, warmup: int) -> dict[int, float]:
    """GPU milliseconds a training step at each batch: `steps` steps of one `fit` on the device-resident image after
    `warmup` untimed ones (the first records the run)."""
    model, trainer = made(backend)
    try:
        out = {}
        for batch in batches:
            trainer.fit(data.coordinates, data.colours, steps=warmup, batch_size=batch, progress=False)
            before = trainer.session.total_gpu_ms
            trainer.fit(data.coordinates, data.colours, steps=steps, batch_size=batch, progress=False)
            out[batch] = (trainer.session.total_gpu_ms - before) / steps
        return out
    finally:
        trainer.close()
        model.close()


@dataclass
class FitQuality:
    backend: str
    batch: int
    checkpoints: list[tuple[int, float, float]] = field(default_factory=list)  # (step, wall s of its fit, PSNR dB)
    skipped: str = ""  # why the later checkpoints were not reached


def fit_quality(backend: str, data: ImageData, batch: int, steps: list[int], deadline: float) -> FitQuality:
    """A fresh model fitted to the image in one `fit` per stretch between `steps` (no `on_step`: the steps of a
    stretch are one run), each timed whole (the data's upload included) and followed by the image's PSNR; a stretch
    projected, at the pace of the first, to end past `deadline` (time.monotonic) is skipped."""
    model, trainer = made(backend)
    result, done = FitQuality(backend, batch), 0
    try:
        for step in sorted(steps):
            if result.checkpoints:
                pace = result.checkpoints[0][1] / result.checkpoints[0][0]
                if time.monotonic() + pace * (step - done) > deadline:
                    result.skipped = f"{step} steps would take about {pace * step:.0f} s, past the time budget"
                    break
            started = time.perf_counter()
            trainer.fit(data.coordinates, data.colours, steps=step - done, batch_size=batch, progress=False)
            seconds = time.perf_counter() - started
            result.checkpoints.append((step, seconds, psnr(model.run(data.coordinates), data.colours)))
            done = step
        return result
    finally:
        trainer.close()
        model.close()


def inference_gpu_ms(backend: str, batch: int, runs: int, seed: int = 0) -> Stats:
    """GPU milliseconds of `model.run` on `batch` uniform points, median over `runs` after two untimed runs."""
    model = model_only(backend)
    try:
        x = np.random.default_rng(seed).random((batch, 2), dtype=np.float32)
        for _ in range(2):
            model.run(x)
        times = []
        for _ in range(runs):
            model.run(x)
            times.append(model.last_gpu_ms)
        return Stats.of(times)
    finally:
        model.close()


def attempt(measure: Callable[[], object]) -> object:
    """`measure()`, or a Reason where coopnn refuses it (a backend that cannot train or run the configuration)."""
    try:
        return measure()
    except CoopnnError as e:
        return Reason(str(e).splitlines()[0])
