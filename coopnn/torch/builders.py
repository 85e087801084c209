"""The coopnn models behind `coopnn.torch`'s modules, from tiny-cuda-nn's constructor arguments and JSON configs.

The configs are read by the readers `coopnn.from_tcnn_config` uses (`coopnn.nets.tcnn_config.network_layers` for
the `network` section, `coopnn.graph.encodings` for the `encoding` one), so a module and a model made from the same
config are the same network, started alike (Xavier-uniform weights, zero biases, the encoding's own start). Configs
are checked before anything touches a device: a bad key is an InputError naming it, on any machine.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from coopnn.errors import InputError
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.encodings.registry import from_config
from coopnn.model import Model, prepare
from coopnn.nets.builders import mlp
from coopnn.nets.encodings import encoding_node
from coopnn.nets.tcnn_config import network_layers

# Makes the model once the configs passed: (backend, weights, device) -> Model.
ModelMaker = Callable[[str, str, Any], Model]


def _dims(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{what} must be a whole number >= 1, not {value!r}")
    return int(value)


def _config(config: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        raise InputError(f"{what} is a tiny-cuda-nn JSON object (a dict), not {config!r}")
    return config


def network(n_input_dims: int, n_output_dims: int, network_config: Mapping[str, Any], seed: int) -> ModelMaker:
    """tcnn.Network: an MLP of `network_config` from n_input_dims to n_output_dims."""
    n_in, n_out = _dims(n_input_dims, "n_input_dims"), _dims(n_output_dims, "n_output_dims")
    hidden, activation, output_activation = network_layers(_config(network_config, "network_config"))
    return lambda backend, weights, device: mlp(
        n_in, hidden, n_out, activation=activation, output_activation=output_activation, seed=seed,
        backend=backend, weights=weights, device=device, initialisation="xavier")


def network_with_input_encoding(n_input_dims: int, n_output_dims: int, encoding_config: Mapping[str, Any],
                                network_config: Mapping[str, Any], seed: int) -> ModelMaker:
    """tcnn.NetworkWithInputEncoding: the encoding of `encoding_config`, then the MLP of `network_config`."""
    n_in, n_out = _dims(n_input_dims, "n_input_dims"), _dims(n_output_dims, "n_output_dims")
    encoding = _config(encoding_config, "encoding_config")
    from_config(encoding, n_in)  # a bad encoding is refused here, before any device is opened
    hidden, activation, output_activation = network_layers(_config(network_config, "network_config"))
    return lambda backend, weights, device: mlp(
        n_in, hidden, n_out, activation=activation, output_activation=output_activation, encoding=encoding,
        seed=seed, backend=backend, weights=weights, device=device, initialisation="xavier")


def encoding(n_input_dims: int, encoding_config: Mapping[str, Any], seed: int) -> ModelMaker:
    """tcnn.Encoding: the encoding of `encoding_config` alone, its output named "y"."""
    n_in = _dims(n_input_dims, "n_input_dims")
    made = from_config(_config(encoding_config, "encoding_config"), n_in)

    def make(backend: str, weights: str, device: Any) -> Model:
        builder = GraphBuilder("encoding")
        encoded, _ = encoding_node(builder, builder.input("x", n_in), made, np.random.default_rng(seed))
        graph = builder.graph([encoded])
        return prepare(graph, backend=backend, weights=weights, device=device)

    return make
