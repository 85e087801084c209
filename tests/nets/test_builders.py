"""`coopnn.mlp`: the graph it builds, PyTorch-like seeded initialisation, the frequency encoding, argument errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import coopnn
from coopnn.errors import InputError
from coopnn.graph.ir import Op
from coopnn.graph.verify import verify
from coopnn.nets.builders import ACTIVATIONS, mlp_graph


def test_plain_mlp_layers_parameters_and_output():
    model = coopnn.mlp(5, [16, 8], 3, activation="tanh", output_activation="sigmoid", backend="numpy")
    graph = verify(model.graph)
    assert [n.op for n in graph.nodes] == [Op.LINEAR] * 3
    assert [n.activation.op for n in graph.nodes] == [Op.TANH, Op.TANH, Op.SIGMOID]
    assert model.inputs[0].name == "x" and model.inputs[0].shape == (None, 5)
    assert model.outputs[0].name == "y" and model.outputs[0].shape == (None, 3)
    shapes = {name: a.shape for name, a in model.parameters().items()}
    assert shapes == {"layers.0.weight": (16, 5), "layers.0.bias": (16,), "layers.1.weight": (8, 16),
                      "layers.1.bias": (8,), "layers.2.weight": (3, 8), "layers.2.bias": (3,)}
    y = model.run(np.zeros((4, 5), np.float32))
    assert y.shape == (4, 3) and np.all((y > 0) & (y < 1))


def test_defaults_and_no_hidden_layer():
    model = coopnn.mlp(4, backend="numpy")
    assert [n.op for n in model.graph.nodes] == [Op.LINEAR] * 3 and model.outputs[0].shape == (None, 3)
    assert model.graph.nodes[-1].activation is None and model.graph.nodes[0].activation.op is Op.RELU
    single = coopnn.mlp(4, [], 2, backend="numpy")
    assert len(single.graph.nodes) == 1 and single.graph.nodes[0].activation is None


def test_initialisation_is_pytorch_uniform_and_seeded():
    graph = mlp_graph(64, [256], 8, seed=3)
    weight = graph.constants["layers.0.weight"]
    bound = 1 / math.sqrt(64)
    assert weight.dtype == np.float32 and np.abs(weight).max() <= bound
    assert abs(weight.std() - bound / math.sqrt(3)) < 0.05 * bound  # the standard deviation of U(-b, b)
    assert np.abs(graph.constants["layers.1.bias"]).max() <= 1 / math.sqrt(256)
    again, other = mlp_graph(64, [256], 8, seed=3), mlp_graph(64, [256], 8, seed=4)
    np.testing.assert_array_equal(again.constants["layers.0.weight"], weight)
    assert not np.array_equal(other.constants["layers.0.weight"], weight)


@pytest.mark.parametrize("octaves", [None, 1, 4])
def test_frequency_encoding(octaves):
    model = coopnn.mlp(3, [8], 2, encoding="frequency", octaves=octaves, backend="numpy")
    k = 6 if octaves is None else octaves
    graph = verify(model.graph)
    first = graph.nodes[[n.op for n in graph.nodes].index(Op.LINEAR)]
    assert graph.values[first.inputs[0]].shape == (None, 3 * (1 + 2 * k))
    x = np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32)
    scaled = (x[:, :, None] * (2.0 ** np.arange(k) * math.pi)).reshape(5, -1)
    encoded = np.concatenate([x, np.sin(scaled), np.cos(scaled)], axis=1)
    weight, bias = model.parameters()["layers.0.weight"], model.parameters()["layers.0.bias"]
    hidden = np.maximum(encoded @ weight.T + bias, 0)
    want = hidden @ model.parameters()["layers.1.weight"].T + model.parameters()["layers.1.bias"]
    np.testing.assert_allclose(model.run(x), want, rtol=1e-5, atol=1e-5)
    assert "encoding.frequencies" not in model.parameters()


def test_every_listed_activation_builds():
    for name in ACTIVATIONS:
        assert mlp_graph(2, [3], 1, activation=name).nodes[0].activation.op is Op(name)


@pytest.mark.parametrize("kwargs, message", [
    ({"activation": "swish"}, "unknown activation 'swish'; activations: none, abs"),
    ({"output_activation": "softmax"}, "unknown output_activation 'softmax'"),
    ({"encoding": "hash_grid"}, "key 'otype' is 'hash_grid', which is not an encoding coopnn has; encodings: C"),
    ({"octaves": 4}, "octaves configures an encoding"),
    ({"encoding": "frequency", "octaves": 0}, "whole number of octaves from 1 to 64"),
    ({"encoding": "frequency", "octaves": 1 << 40}, "octaves from 1 to 64 .*, not 1099511627776"),
    ({"encoding": "frequency", "octaves": True}, "octaves from 1 to 64 .*, not True"),
    ({"seed": "a"}, "seed must be a whole number >= 0, not 'a'"),
    ({"seed": -1}, "seed must be a whole number >= 0, not -1"),
    ({"seed": 1.5}, "seed must be a whole number >= 0, not 1.5"),
    ({"hidden": [8, 0]}, "hidden width must be a whole number >= 1, not 0"),
    ({"out_features": 2.5}, "out_features must be a whole number"),
    ({"hidden": [10**6, 10**6]}, r"an MLP of widths \[2, 1000000, 1000000, 1\] has 1,000,005,000,001 parameters; "
                                 r"coopnn.mlp makes up to 268,435,456"),
])
def test_argument_errors(kwargs, message):
    arguments = {"in_features": 2, "hidden": [8], "out_features": 1, **kwargs}
    with pytest.raises(InputError, match=message):
        mlp_graph(**arguments)
