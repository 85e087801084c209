"""Image helpers: reading, the PNG writer used without matplotlib, and plots with and without it."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import CoopnnError
from coopnn.examples import images


def test_default_image_is_a_photograph_shipped_with_matplotlib():
    path = images.default_image_path()
    assert path.name == "grace_hopper.jpg" and "matplotlib" in str(path)
    image = images.read_image(path)
    assert image.shape == (600, 512, 3) and image.dtype == np.float32 and 0 <= image.min() < image.max() <= 1


def test_fallback_png_encoder_is_read_back_exactly(tmp_path):
    pixels = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    images.encode_png(tmp_path / "p.png", pixels)
    np.testing.assert_array_equal(np.round(images.read_image(tmp_path / "p.png") * 255), pixels)


def test_without_matplotlib_pngs_and_plots_still_get_written(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "_matplotlib", lambda: None)
    gradient = np.linspace(0, 1, 4 * 6 * 3).reshape(4, 6, 3)
    images.write_png(tmp_path / "g.png", gradient)
    images.plot(tmp_path / "plot.png", [0, 10, 20], [5.0, 12.0, 14.0], xlabel="step", ylabel="dB", title="t")
    with pytest.raises(CoopnnError, match="ships with matplotlib"):
        images.default_image_path()
    with pytest.raises(CoopnnError, match="reading images needs matplotlib"):
        images.read_image(tmp_path / "g.png")
    monkeypatch.undo()
    np.testing.assert_array_equal(np.round(images.read_image(tmp_path / "g.png") * 255), np.round(gradient * 255))
    chart = images.read_image(tmp_path / "plot.png")
    assert chart.shape == (240, 320, 3) and (chart < 0.5).any()


def test_grey_and_rgba_images_become_rgb(tmp_path):
    import matplotlib.image

    matplotlib.image.imsave(tmp_path / "rgba.png", np.zeros((3, 4, 4)) + [1, 0, 0, 0.5])
    assert images.read_image(tmp_path / "rgba.png").tolist() == np.tile([1.0, 0.0, 0.0], (3, 4, 1)).tolist()
    np.save(tmp_path / "grey.npy", np.zeros(2))
    with pytest.raises(CoopnnError, match="cannot read image"):
        images.read_image(tmp_path / "grey.npy")
