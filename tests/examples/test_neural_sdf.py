"""The neural SDF example at a tiny size on the CPU (numpy trains and renders): the learnt field's silhouette matches
the analytic shape's and the PNGs are written; on a GPU the gpu preset trains on a GPU backend."""

from __future__ import annotations

import pytest

from coopnn.errors import CoopnnError
from coopnn.examples import neural_sdf as example
from coopnn.examples.images import read_image


def test_a_tiny_fit_renders_the_shape(tmp_path, capsys):
    assert example.main(["--preset", "cpu", "--steps", "60", "--batch-size", "2048", "--side", "40",
                         "--train-backend", "numpy", "--backend", "numpy", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert "trained on numpy" in out.out and "fit [" in out.err and "trace [" in out.err
    iou = float(out.out.split("silhouette IoU against the analytic shape ")[1].split()[0])
    assert iou > 0.9
    assert read_image(tmp_path / "neural_sdf.png").shape == (40, 40, 3)
    assert read_image(tmp_path / "comparison.png").shape == (40, 40 + 2 + 40, 3)


def test_an_unknown_training_backend_is_a_one_line_error(tmp_path, capsys):
    assert example.main(["--preset", "cpu", "--steps", "1", "--train-backend", "nonesuch", "-o", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith("coopnn: error:")


@pytest.mark.gpu
def test_the_gpu_preset_trains_on_a_gpu_backend_and_renders_the_shape(tmp_path, validated_device):
    if not example.has_gpu():
        pytest.skip("no GPU: the gpu preset trains on a GPU backend")
    result = example.neural_sdf(preset="gpu", steps=500, side=128, output_dir=tmp_path, progress=False)
    assert result.train_backend in example.GPU_TRAINING and result.render_backend != "numpy"
    assert result.silhouette_iou > 0.97


@pytest.mark.parametrize("arguments, message", [
    ({"preset": "phone"}, "preset 'phone' is not one of cpu, gpu"),
    ({"steps": -1}, "steps must be a whole number >= 0, not -1"),
    ({"batch_size": 0}, "batch_size must be a whole number >= 1, not 0"),
    ({"side": "big"}, "side must be a whole number >= 1, not 'big'"),
    ({"side": 2.5}, "side must be a whole number >= 1"),
    ({"seed": -1}, "seed must be a whole number from 0 to 2"),
    ({"backend": "nonesuch"}, "unknown backend 'nonesuch'"),
])
def test_bad_arguments_are_refused_before_the_fit(tmp_path, monkeypatch, arguments, message):
    monkeypatch.setattr(example, "trainer_for", lambda *a: pytest.fail("the fit started"))
    with pytest.raises(CoopnnError, match=message):
        example.neural_sdf(**{"preset": "cpu", **arguments}, output_dir=tmp_path, progress=False)


def test_an_output_folder_that_cannot_be_made_is_refused_before_the_fit(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(example, "trainer_for", lambda *a: pytest.fail("the fit started"))
    taken = tmp_path / "file"
    taken.write_text("")
    assert example.main(["--preset", "cpu", "-o", str(taken / "inside")]) == 1
    assert capsys.readouterr().err.startswith("coopnn: error: cannot write the PNGs to")


@pytest.mark.parametrize("backend, weights", [("coopvec", "fp16"), ("portable", "fp32"), ("numpy", "fp32")])
def test_each_backend_trains_in_a_weight_format_it_takes(backend, weights, monkeypatch):
    # coopvec refuses float32 weights: asked for them, "auto" would always fall through to portable
    made = {}
    monkeypatch.setattr(example.coopnn, "from_tcnn_config", lambda *args, **kwargs: made.update(kwargs) or (1, 2))
    assert example.trainer_for(example.sdf_config(example.PRESETS["cpu"]), backend, 0) == (backend, 1, 2)
    assert made["backend"] == backend and made["weights"] == weights
