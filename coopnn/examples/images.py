"""Image files for the examples: reading through matplotlib, and writing PNG images and plots.

PNGs are written with matplotlib when it is installed and otherwise by `write_png`, a minimal encoder (8-bit RGB,
zlib) so that results never depend on an optional package; without matplotlib a plot is drawn as a bare line chart.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Sequence

import numpy as np

from coopnn.errors import CoopnnError

DEFAULT_IMAGE = "grace_hopper.jpg"  # a photograph among matplotlib's sample data, installed with matplotlib


def _matplotlib():
    try:
        import matplotlib.image
    except ImportError:
        return None
    return matplotlib


def default_image_path() -> Path:
    """Where matplotlib's sample photograph is installed (CoopnnError without matplotlib)."""
    if _matplotlib() is None:
        raise CoopnnError(f"the default image ({DEFAULT_IMAGE}) ships with matplotlib: install it or name an image")
    from matplotlib import cbook

    return Path(cbook.get_sample_data(DEFAULT_IMAGE, asfileobj=False))


def read_image(path: str | os.PathLike) -> np.ndarray:
    """An image file as float32 RGB in [0, 1], shape [height, width, 3] (grey is repeated, alpha dropped)."""
    mpl = _matplotlib()
    if mpl is None:
        raise CoopnnError("reading images needs matplotlib (pip install matplotlib)")
    try:
        image = np.asarray(mpl.image.imread(os.fspath(path)))
    except (OSError, ValueError, SyntaxError) as e:
        raise CoopnnError(f"cannot read image {os.fspath(path)!r}: {e}") from e
    if image.dtype.kind in "ui":
        image = image / np.iinfo(image.dtype).max
    if image.ndim == 2:
        image = image[..., None]
    if image.ndim != 3:
        raise CoopnnError(f"image {os.fspath(path)!r} has shape {list(image.shape)}; expected height, width, channels")
    return np.ascontiguousarray(np.broadcast_to(image[..., :3], image.shape[:2] + (3,)), np.float32)


def write_png(path: str | os.PathLike, image: np.ndarray) -> None:
    """Write float RGB in [0, 1] (values outside are clipped) as an 8-bit PNG."""
    pixels = np.round(np.clip(image, 0, 1) * 255).astype(np.uint8)
    mpl = _matplotlib()
    if mpl is not None:
        mpl.image.imsave(os.fspath(path), pixels)
        return
    encode_png(path, pixels)


def encode_png(path: str | os.PathLike, pixels: np.ndarray) -> None:
    """The PNG encoder used without matplotlib: 8-bit RGB, no filtering, one zlib stream."""
    height, width, _ = pixels.shape
    rows = np.concatenate([np.zeros((height, 1), np.uint8), pixels.reshape(height, width * 3)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, RGB, deflate, no filter, no interlace
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
                + chunk(b"IEND", b""))


def plot(path: str | os.PathLike, x: Sequence[float], y: Sequence[float], *, xlabel: str, ylabel: str,
         title: str) -> None:
    """A line plot written as PNG: with matplotlib when installed, else a bare chart (axes and line, no text)."""
    if _matplotlib() is None:
        write_png(path, _line_chart(np.asarray(x, float), np.asarray(y, float)))
        return
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 4), dpi=100)
    axes = figure.subplots()
    axes.plot(x, y, marker=".")
    axes.set(xlabel=xlabel, ylabel=ylabel, title=title)
    axes.grid(True, alpha=0.3)
    figure.savefig(os.fspath(path))


def _unit(v: np.ndarray) -> np.ndarray:
    low, high = v.min(), v.max()
    return (v - low) / (high - low) if high > low else np.zeros_like(v)


def _line_chart(x: np.ndarray, y: np.ndarray, height: int = 240, width: int = 320, margin: int = 16) -> np.ndarray:
    image = np.ones((height, width, 3))
    image[margin:height - margin + 1, margin] = 0  # y axis
    image[height - margin, margin:width - margin + 1] = 0  # x axis
    t = np.linspace(0, len(x) - 1, 8 * width)  # dense samples between the points, so the line has no gaps
    columns = margin + _unit(np.interp(t, np.arange(len(x)), x)) * (width - 2 * margin)
    rows = height - margin - _unit(np.interp(t, np.arange(len(y)), y)) * (height - 2 * margin)
    image[np.round(rows).astype(int), np.round(columns).astype(int)] = (0.1, 0.3, 0.8)
    return image
