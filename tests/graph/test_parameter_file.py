"""Parameter files: `Model.save_parameters`, then `coopnn.load(..., parameters_file=)` or `Model.load_parameters`,
round trip by stable name, and every kind of bad file raises ModelFormatError naming the file and the tensor, the same
both ways (a model whose `load_parameters` fails keeps its parameters)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

import coopnn
from coopnn.errors import ModelFormatError
from tests.conftest import ROOT


@pytest.fixture
def exported(tmp_path):
    """An mlp saved as ONNX, and a trained copy of its parameters in a parameters file."""
    model = coopnn.mlp(2, [16], 3, encoding="frequency", octaves=2, backend="numpy")
    model.save(tmp_path / "model.onnx")
    x = np.random.default_rng(0).uniform(0, 1, (128, 2)).astype(np.float32)
    coopnn.Trainer(model, optimizer=coopnn.optim.Adam(lr=0.05)).fit(x, np.zeros((128, 3)), steps=5, progress=False)
    model.save_parameters(tmp_path / "trained.safetensors")
    return tmp_path, model, x


WAYS = ["parameters_file", "load_parameters"]


def _load(way: str, model_path, parameters_path) -> coopnn.Model:
    """The model at `model_path` with the parameters of `parameters_path`, read the `way` named."""
    if way == "parameters_file":
        return coopnn.load(model_path, backend="numpy", parameters_file=parameters_path)
    model = coopnn.load(model_path, backend="numpy")
    before = model.parameters()
    try:
        model.load_parameters(parameters_path)
    except ModelFormatError:
        assert all(np.array_equal(model.parameters()[k], v) for k, v in before.items())
        model.close()
        raise
    return model


def _metadata():
    return {"coopnn": "weights 1"}


@pytest.mark.parametrize("way", WAYS)
def test_round_trip(exported, way):
    folder, trained, x = exported
    with coopnn.load(folder / "model.onnx", backend="numpy") as untrained:
        assert not np.array_equal(untrained.run(x), trained.run(x))
    with _load(way, folder / "model.onnx", folder / "trained.safetensors") as model:
        np.testing.assert_array_equal(model.run(x), trained.run(x))
        for name, array in trained.parameters().items():
            np.testing.assert_array_equal(model.parameters()[name], array)


def test_file_contents_are_keyed_by_stable_names(exported):
    from safetensors import safe_open

    folder, trained, _ = exported
    with safe_open(str(folder / "trained.safetensors"), framework="numpy") as f:
        assert set(f.keys()) == set(trained.parameters()) == {
            "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"}
        assert f.metadata() == {"coopnn": "weights 1", "model": "mlp"}


def test_zoo_model_weights_round_trip(tmp_path):
    path = ROOT / "models" / "mlp_3_64x2_3.onnx"
    with coopnn.load(path, backend="numpy") as model:
        doubled = {name: 2 * array for name, array in model.parameters().items()}
        model.set_parameters(doubled)
        model.save_parameters(tmp_path / "w.safetensors")
        x = np.ones((2, 3), np.float32)
        with coopnn.load(path, backend="numpy", parameters_file=tmp_path / "w.safetensors") as loaded:
            np.testing.assert_array_equal(loaded.run(x), model.run(x))


def _write(folder, tensors, metadata=None):
    path = folder / "bad.safetensors"
    save_file(tensors, str(path), metadata=_metadata() if metadata is None else metadata)
    return path


@pytest.mark.parametrize("change, message", [
    (lambda t: t.pop("layers.1.bias"), r"'layers.1.bias' is missing"),
    (lambda t: t.update(extra=np.zeros(2, np.float32)), r"'extra' is not a parameter"),
    (lambda t: t.update({"layers.0.weight": np.zeros((16, 3), np.float32)}),
     r"'layers.0.weight' has shape \[16, 3\], the model's has \[16, 10\]"),
    (lambda t: t.update({"layers.0.bias": np.arange(16)}), r"tensor 'layers.0.bias' has element type I64"),
    (lambda t: t["layers.1.bias"].__setitem__(0, np.nan), r"tensor 'layers.1.bias' holds NaN or infinite values"),
])
@pytest.mark.parametrize("way", WAYS)
def test_bad_tensors(exported, change, message, way):
    folder, trained, _ = exported
    tensors = {k: np.array(v) for k, v in trained.parameters().items()}
    change(tensors)
    with pytest.raises(ModelFormatError, match=message):
        _load(way, folder / "model.onnx", _write(folder, tensors))


def test_float16_and_float64_tensors_are_accepted(exported):
    folder, trained, x = exported
    tensors = {k: np.array(v, np.float64) for k, v in trained.parameters().items()}
    tensors["layers.1.bias"] = tensors["layers.1.bias"].astype(np.float16)
    with coopnn.load(folder / "model.onnx", backend="numpy", parameters_file=_write(folder, tensors)) as model:
        np.testing.assert_array_equal(model.parameters()["layers.1.bias"],
                                      trained.parameters()["layers.1.bias"].astype(np.float16).astype(np.float32))


@pytest.mark.parametrize("way", WAYS)
def test_unreadable_files(exported, tmp_path, way):
    folder, trained, _ = exported
    model = folder / "model.onnx"
    with pytest.raises(ModelFormatError, match="cannot read weights file .*missing.safetensors"):
        _load(way, model, tmp_path / "missing.safetensors")
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\xff" * 64)
    with pytest.raises(ModelFormatError, match="cannot read weights file"):
        _load(way, model, garbage)
    header = json.dumps({"layers.0.bias": {"dtype": "F32", "shape": [1 << 30], "data_offsets": [0, 1 << 32]}}).encode()
    lying = tmp_path / "lying.safetensors"
    lying.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)
    with pytest.raises(ModelFormatError, match="cannot read weights file"):
        _load(way, model, lying)
    foreign = _write(tmp_path, {k: np.array(v) for k, v in trained.parameters().items()}, metadata={})
    with pytest.raises(ModelFormatError, match="is a safetensors file but not a coopnn weights file"):
        _load(way, model, foreign)
