"""`coopnn fit-image --export-shader DIR`: the trained network exported and drawn by a fragment shader on the Vulkan
device, its PNG beside the reconstruction and showing the same picture."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.examples import fit_image as example
from coopnn.examples.images import read_image
from tests.export.harness import require_compilers


@pytest.mark.vulkan
def test_the_exported_shader_draws_the_reconstruction(require_vulkan, tmp_path, capsys):
    require_compilers()
    export_dir = tmp_path / "shader"
    code = example.main(["--size", "16", "--steps", "20", "--batch-size", "128", "--hidden", "16", "16",
                         "--octaves", "3", "--eval-every", "10", "-o", str(tmp_path), "--export-shader",
                         str(export_dir)])
    assert code == 0
    assert "exported_shader.png" in capsys.readouterr().out
    drawn, reconstruction = read_image(tmp_path / "exported_shader.png"), read_image(tmp_path / "reconstruction.png")
    assert drawn.shape == reconstruction.shape == (16, 16, 3)
    # float16 weights against float32 ones: at most one 8-bit step apart
    assert np.abs(drawn - reconstruction).max() <= 1.5 / 255
    assert {p.name for p in export_dir.iterdir()} >= {"texture.glsl", "texture.weights.bin", "texture.json",
                                                      "texture.h", "coopnn_weights.h"}
