"""`coopnn.from_tcnn_config` and tiny-cuda-nn parameter buffers: tcnn's image config builds the model and trainer it
describes, what coopnn cannot do is an InputError naming the key, and a tcnn buffer gives the outputs tcnn's
bias-free padded MLP computes."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.errors import InputError
from coopnn.nets.tcnn_parameters import load_tcnn_parameters
from tests.conftest import import_torch

HASH_ENCODING = {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 15,
                 "base_resolution": 16, "per_level_scale": 1.5, "fixed_point_pos": False}
IMAGE_CONFIG = {  # tiny-cuda-nn's data/config_hash.json
    "loss": {"otype": "RelativeL2"},
    "optimizer": {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-15,
                  "l2_reg": 1e-6},
    "encoding": HASH_ENCODING,
    "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
                "n_hidden_layers": 2},
}


def test_tcnns_image_config_builds_its_model_and_trainer():
    model, trainer = coopnn.from_tcnn_config(IMAGE_CONFIG, 2, 3, backend="numpy")
    shapes = {name: value.shape for name, value in model.parameters().items()}
    assert shapes["layers.0.weight"] == (64, 32) and shapes["layers.2.weight"] == (3, 64)
    assert len([n for n in shapes if n.endswith(".weight")]) == 3
    assert not model.parameters()["layers.0.bias"].any()
    assert trainer.loss.name == "relative_l2"
    assert trainer.optimizer.hyperparameters() == {"lr": 0.01, "betas": [0.9, 0.99], "eps": 1e-15,
                                                   "weight_decay": 1e-6, "no_decay": ["encoding.params"]}
    assert model.run(np.random.default_rng(0).random((4, 2), np.float32)).shape == (4, 3)
    trainer.close()


@pytest.mark.parametrize("change, key", [
    ({"network": {"otype": "ResNet"}}, "'network.otype' is 'ResNet'"),
    ({"network": {"otype": "FullyFusedMLP", "n_neurons": 48}}, "'network.n_neurons' is 48"),
    ({"network": {"otype": "CutlassMLP", "activation": "Squareplus"}}, "'network.activation' is 'Squareplus'"),
    ({"network": {"otype": "CutlassMLP", "feedback_alignment": True}}, "'network.feedback_alignment'"),
    ({"loss": {"otype": "MAPE"}}, "'loss.otype' is 'MAPE'"),
    ({"optimizer": {"otype": "Shampoo"}}, "'optimizer.otype' is 'Shampoo'"),
    ({"optimizer": {"otype": "Adam", "adabound": True}}, "'optimizer.adabound' is not supported"),
    ({"encoding": {"otype": "HashGrid", "n_features_per_level": 3}}, "'n_features_per_level' is 3"),
    ({"encoding": {"otype": "Blob"}}, "'otype' is 'Blob'"),
    ({"shampoo": {}}, "key 'shampoo' is not one coopnn reads"),
    ({"network": {"otype": "CutlassMLP", "n_hidden_layers": 1 << 40}}, "n_hidden_layers. is 1,099,511,627,776"),
    ({"network": {"otype": "CutlassMLP", "n_neurons": 0, "n_hidden_layers": 1 << 40}}, "'network.n_hidden_layers'"),
    ({"optimizer": {"otype": "Adam", "learning_rate": "0.01"}}, "'optimizer.learning_rate' must be a finite number"),
    ({"optimizer": {"otype": "Adam", "beta1": None}}, "'optimizer.beta1' must be a finite number, not None"),
    ({"optimizer": {"otype": "Adam", "epsilon": [1e-15]}}, "'optimizer.epsilon' must be a finite number"),
    ({"optimizer": {"otype": "Adam", "learning_rate": float("inf")}}, "'optimizer.learning_rate' must be a finite"),
    ({"optimizer": {"otype": "SGD", "l2_reg": 10 ** 400}}, "'optimizer.l2_reg' must be a finite number"),
    ({"optimizer": {"otype": "SGD", "learning_rate": True}}, "'optimizer.learning_rate' must be a finite number"),
])
def test_what_coopnn_cannot_do_names_the_key(change, key):
    with pytest.raises(InputError, match=key):
        coopnn.from_tcnn_config({**IMAGE_CONFIG, **change}, 2, 3, backend="numpy")


def test_five_input_dimensions_are_refused_for_a_grid():
    with pytest.raises(InputError, match="grids take 1 to 4"):
        coopnn.from_tcnn_config(IMAGE_CONFIG, 5, 3, backend="numpy")


def test_no_hidden_layers_is_one_linear_after_the_encoding():
    model = coopnn.mlp(3, [], 2, encoding={"otype": "SphericalHarmonics", "degree": 2}, backend="numpy")
    assert model.parameters()["layers.0.weight"].shape == (2, 4)
    assert sorted(model.parameters()) == ["layers.0.bias", "layers.0.weight"]


def tcnn_reference(encoding, encoded_params, matrices, x, pad_value, pads_in_front=False):
    """tcnn's forward pass written out: the encoding padded to 16 columns, bias-free ReLU layers, padded outputs."""
    encoded = encoding.forward(x, encoded_params)
    pad = np.full((len(x), matrices[0].shape[1] - encoded.shape[1]), pad_value, np.float32)
    h = np.concatenate([pad, encoded] if pads_in_front else [encoded, pad], axis=1).astype(np.float64)
    for i, matrix in enumerate(matrices):
        h = h @ matrix.T
        if i < len(matrices) - 1:
            h = np.maximum(h, 0)
    return h


@pytest.mark.parametrize("encoding, n_in, pad_value, front", [
    (HASH_ENCODING, 2, 0.0, False),
    ({"otype": "Frequency", "n_frequencies": 3}, 2, 1.0, False),
    ({"otype": "SphericalHarmonics", "degree": 3}, 3, 1.0, True),
])
def test_a_tcnn_parameter_buffer_gives_tcnns_outputs(encoding, n_in, pad_value, front):
    config = {**IMAGE_CONFIG, "encoding": encoding,
              "network": {"otype": "CutlassMLP", "n_neurons": 32, "n_hidden_layers": 2}}
    model, trainer = coopnn.from_tcnn_config(config, n_in, 3, backend="numpy")
    trainer.close()
    node = next(n for n in model.graph.nodes if n.op.value == "encoding")
    enc = node.attrs["encoding"]
    padded = -(-enc.n_output_dims // 16) * 16
    rng = np.random.default_rng(5)
    matrices = [rng.standard_normal((32, padded)) / 4, rng.standard_normal((32, 32)) / 4,
                rng.standard_normal((16, 32)) / 4]
    grid = rng.standard_normal(enc.n_parameters) * 0.1
    buffer = np.concatenate([m.ravel() for m in matrices] + [grid]).astype(np.float32)
    load_tcnn_parameters(model, buffer)
    x = rng.random((6, n_in), dtype=np.float32)
    want = tcnn_reference(enc, grid.astype(np.float32), [m.astype(np.float32) for m in matrices], x, pad_value,
                          front)[:, :3]
    np.testing.assert_allclose(model.run(x), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(InputError, match="this one holds 5"):
        load_tcnn_parameters(model, np.zeros(5))


def _small_grid_model():
    config = {**IMAGE_CONFIG, "encoding": {"otype": "HashGrid", "n_levels": 2, "log2_hashmap_size": 6},
              "network": {"otype": "CutlassMLP", "n_neurons": 16, "n_hidden_layers": 1}}
    model, trainer = coopnn.from_tcnn_config(config, 2, 3, backend="numpy")
    trainer.close()
    return model, 16 * 16 + 16 * 16 + model.parameters()["encoding.params"].size


@pytest.mark.parametrize("buffer, message", [
    (lambda n: np.zeros(n, np.int32), "holds float16 or float32 values, not int32"),
    (lambda n: np.zeros(n, np.complex64), "not complex64"),
    (lambda n: np.zeros(n, bool), "not bool"),
    (lambda n: np.array(["0"] * n), "not <U1"),
    (lambda n: bytes(4 * n), "not |S"),
    (lambda n: None, "not object"),
    (lambda n: [[0.0] * n, [0.0]], "is an array of float16 or float32 values, not list"),
])
def test_a_buffer_of_the_wrong_type_is_refused(buffer, message):
    model, size = _small_grid_model()
    with pytest.raises(InputError, match=message):
        load_tcnn_parameters(model, buffer(size))


def test_the_pytorch_bindings_params_load_as_they_are():
    torch = import_torch()
    model, size = _small_grid_model()
    values = np.random.default_rng(1).standard_normal(size).astype(np.float16)
    load_tcnn_parameters(model, torch.nn.Parameter(torch.from_numpy(values)))  # requires_grad, as tcnn's are
    np.testing.assert_array_equal(model.parameters()["encoding.params"], values[-(size - 512):].astype(np.float32))
    with pytest.raises(InputError, match="not Tensor"):
        load_tcnn_parameters(model, torch.zeros(size, dtype=torch.bfloat16))
