"""The fit-image example: a tiny run through the function, `python -m` entry and `coopnn fit-image` writes
readable PNGs and a PSNR table, and PSNR rises; its image helpers."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from coopnn.cli import main as cli_main
from coopnn.examples import fit_image as example
from coopnn.examples.image_models import megapixel_image_path
from coopnn.examples.images import read_image, write_png

TINY = ["--size", "16", "--steps", "30", "--batch-size", "128", "--hidden", "16", "16", "--octaves", "3",
        "--eval-every", "10", "--lr", "0.02"]


def test_tiny_run_learns_and_writes_everything(tmp_path):
    result = example.fit_image(size=16, steps=30, batch_size=128, hidden=(16, 16), octaves=3, lr=0.02,
                               eval_every=10, output_dir=tmp_path, progress=False)
    assert [step for step, _ in result.psnr] == [0, 10, 20, 30]
    assert result.final_psnr > result.psnr[0][1] + 3
    assert read_image(result.reconstruction).shape == (16, 16, 3)
    target = read_image(result.target)
    assert target.shape == (16, 16, 3) and target.std() > 0.05  # a photograph, not a flat placeholder
    assert read_image(result.plot).shape[:2] == (400, 600)
    lines = result.table.read_text().splitlines()
    assert lines[0] == "step,psnr_db" and len(lines) == 5 and float(lines[-1].split(",")[1]) == pytest.approx(
        result.final_psnr, abs=1e-3)


def test_command_line_and_module_entry(tmp_path, capsys):
    assert cli_main(["fit-image", *TINY, "--output-dir", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr()
    assert "PSNR" in out.out and "reconstruction.png" in out.out and "fit [" in out.err and "psnr" in out.err
    assert (tmp_path / "cli" / "psnr.png").is_file()
    assert example.main([str(tmp_path / "cli" / "target.png"), *TINY, "-o", str(tmp_path / "module")]) == 0
    np.testing.assert_allclose(read_image(tmp_path / "module" / "target.png"),
                               read_image(tmp_path / "cli" / "target.png"), atol=1 / 255)


def test_unreadable_image_is_a_one_line_error(tmp_path, capsys):
    assert example.main([str(tmp_path / "missing.png"), "-o", str(tmp_path)]) == 1
    assert "coopnn: error: cannot read image" in capsys.readouterr().err


def test_square_box_filters_the_centre():
    image = np.arange(6 * 8, dtype=np.float32).reshape(6, 8, 1)
    out = example.square(image, 3)
    assert out.shape == (3, 3, 1)
    assert out[0, 0, 0] == image[0:2, 1:3].mean()
    assert example.square(image, 100).shape == (6, 6, 1)


def test_pixel_centres_and_psnr():
    centres = example.pixel_centres(4)
    assert centres.shape == (16, 2) and centres[0].tolist() == [0.125, 0.125] and centres[1].tolist() == [0.125, 0.375]
    assert example.psnr(np.full((2, 2), 0.6), np.full((2, 2), 0.5)) == pytest.approx(20.0)
    assert example.psnr(np.ones(3), np.ones(3)) == float("inf")


def test_a_tiny_hash_grid_run_learns_and_writes_the_crop(tmp_path):
    image = tmp_path / "small.png"
    write_png(image, example.square(read_image(example.default_image_path()), 32))
    result = example.fit_image(image, steps=40, batch_size=512, eval_every=20, output_dir=tmp_path / "out",
                               progress=False, encoding="hashgrid")
    assert [step for step, _ in result.psnr] == [0, 20, 40]
    assert result.final_psnr > result.psnr[0][1] + 3
    assert read_image(result.reconstruction).shape == (32, 32, 3)  # the whole image: tcnn configs do not shrink it
    assert read_image(result.crop).shape == (32, 32 + 2 + 32, 3)


@pytest.mark.vulkan
def test_the_hash_grid_trains_on_the_portable_backend_from_the_command_line(tmp_path, capsys, validated_device):
    image = tmp_path / "small.png"
    write_png(image, example.square(read_image(example.default_image_path()), 32))
    assert cli_main(["fit-image", str(image), "--encoding", "hashgrid", "--backend", "portable", "--steps", "40",
                     "--batch-size", "512", "--eval-every", "20", "--output-dir", str(tmp_path / "out")]) == 0
    lines = (tmp_path / "out" / "psnr.csv").read_text().splitlines()
    psnr = [float(line.split(",")[1]) for line in lines[1:]]
    assert len(psnr) == 3 and psnr[-1] > psnr[0] + 3
    assert read_image(tmp_path / "out" / "reconstruction.png").shape == (32, 32, 3)


def test_a_tcnn_json_config_file_and_a_bad_one(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text('{"otype": "DenseGrid", "n_levels": 4, "base_resolution": 4}')
    image = tmp_path / "small.png"
    write_png(image, example.square(read_image(example.default_image_path()), 16))
    assert example.main([str(image), "--encoding", str(config), "--steps", "4", "--batch-size", "64",
                         "--eval-every", "2", "-o", str(tmp_path / "out")]) == 0
    assert "crop.png" in capsys.readouterr().out
    config.write_text('{"otype": "HashGrid", "n_features_per_level": 3}')
    assert example.main([str(image), "--encoding", str(config), "-o", str(tmp_path / "bad")]) == 1
    assert "key 'n_features_per_level' is 3" in capsys.readouterr().err


def test_the_megapixel_default_is_slangpys_1024_square_photograph():
    if importlib.util.find_spec("slangpy") is None:
        pytest.skip("the megapixel default image ships with slangpy, which is not installed")

    image = read_image(megapixel_image_path())
    assert image.shape == (1024, 1024, 3) and image.std() > 0.05


def test_the_pytorch_reference_learns(tmp_path):
    pytest.importorskip("torch", reason="the PyTorch reference needs torch")
    from coopnn.examples.torch_image_reference import train

    image = tmp_path / "small.png"
    write_png(image, example.square(read_image(example.default_image_path()), 32))
    rows = train([1, 30], 256, "cpu", image=str(image))
    assert [step for step, _, _ in rows] == [1, 30]
    assert rows[1][1] > rows[0][1] + 3 and rows[1][2] > 0
    assert [step for step, _, _ in train([1, 30], 256, "cpu", image=str(image), seconds=0)] == [1]


SMALL_GRID = ('{"otype": "HashGrid", "n_levels": 8, "n_features_per_level": 2, "log2_hashmap_size": 10, '
              '"base_resolution": 4, "per_level_scale": 1.5}')


@pytest.mark.vulkan
def test_a_hash_grid_on_the_portable_backend_keeps_improving_as_numpy_does(tmp_path, validated_device):
    """Every evaluation runs the weights of its own step on the device, tables included: PSNR rises at each one and
    follows the numpy oracle's (same batches; float32 atomics add the table's gradient in another order)."""
    config = tmp_path / "grid.json"
    config.write_text(SMALL_GRID)
    image = tmp_path / "small.png"
    write_png(image, example.square(read_image(example.default_image_path()), 32))
    curves = {backend: example.fit_image(image, steps=60, batch_size=512, eval_every=15, backend=backend,
                                         output_dir=tmp_path / backend, progress=False, encoding=str(config)).psnr
              for backend in ("numpy", "portable")}
    psnr = [value for _, value in curves["portable"]]
    assert all(later > earlier for earlier, later in zip(psnr, psnr[1:])), psnr
    np.testing.assert_allclose(psnr, [value for _, value in curves["numpy"]], atol=0.05)
