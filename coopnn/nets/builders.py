"""Models made without ONNX: `coopnn.mlp(...)` builds the graph IR of an MLP directly and prepares it.

Weights and biases start as PyTorch's nn.Linear starts them (uniform in +-1/sqrt(fan_in)), drawn from a seeded
generator, so a seed gives the same network everywhere. Layers are LINEAR nodes named `layers.{i}` with their
activation fused, so the parameters are named `layers.{i}.weight` and `layers.{i}.bias` like a PyTorch Sequential.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from coopnn.errors import InputError
from coopnn.graph import activations, ops
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.ir import Activation, Graph, Op
from coopnn.model import Model, prepare
from coopnn.nets.encodings import encode

# the activations a name makes (a tensor-language function is made from its text: coopnn.tl.activation)
ACTIVATIONS = tuple(sorted(op.value for op, d in ops.REGISTRY.items()
                           if d.fusable_activation and not activations.ACTIVATIONS[op].required))
MAX_PARAMETERS = 1 << 28  # what `mlp_graph` makes at most: 1 GiB of float32 (drawn in float64 first)


def _activation(name: str | Activation | None, role: str) -> Activation | None:
    if isinstance(name, Activation):
        return name
    if name is None or name == "none":
        return None
    if name not in ACTIVATIONS:
        raise InputError(f"unknown {role} {name!r}; activations: none, {', '.join(ACTIVATIONS)}")
    return Activation(Op(name))


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{what} must be a whole number >= 1, not {value!r}")
    return int(value)


INITIALISATIONS = ("pytorch", "xavier")


def _initial_layer(rng: np.random.Generator, fan_in: int, fan_out: int, initialisation: str):
    """A layer's starting weight and bias: PyTorch's nn.Linear, or tiny-cuda-nn's (Xavier-uniform weights, which
    tcnn's MLPs start with, and zero biases, which they do not have)."""
    if initialisation == "xavier":
        bound = np.sqrt(6 / (fan_in + fan_out))
        return rng.uniform(-bound, bound, (fan_out, fan_in)), np.zeros(fan_out)
    bound = 1 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, (fan_out, fan_in)), rng.uniform(-bound, bound, fan_out)


def mlp_graph(in_features: int, hidden: Sequence[int] = (64, 64), out_features: int = 3, *,
              activation: str | Activation | None = "relu", output_activation: str | Activation | None = None,
              encoding: str | Mapping[str, Any] | None = None, octaves: int | None = None, seed: int = 0,
              name: str = "mlp", initialisation: str = "pytorch") -> Graph:
    """The graph IR of the MLP `mlp` prepares (same arguments, less the backend's)."""
    widths = [_positive(in_features, "in_features"), *(_positive(h, "hidden width") for h in hidden),
              _positive(out_features, "out_features")]
    hidden_act, output_act = _activation(activation, "activation"), _activation(output_activation, "output_activation")
    if initialisation not in INITIALISATIONS:
        raise InputError(f"unknown initialisation {initialisation!r}; initialisations: {', '.join(INITIALISATIONS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a whole number >= 0, not {seed!r}")
    builder = GraphBuilder(name)
    x = builder.input("x", widths[0])
    rng = np.random.default_rng(seed)
    if encoding is not None:
        x, widths[0] = encode(builder, x, encoding, {} if octaves is None else {"octaves": octaves}, rng)
    elif octaves is not None:
        raise InputError("octaves configures an encoding: pass encoding='frequency' as well")
    count = sum((fan_in + 1) * fan_out for fan_in, fan_out in zip(widths[:-1], widths[1:]))
    if count > MAX_PARAMETERS:
        raise InputError(f"an MLP of widths {widths} has {count:,} parameters; coopnn.mlp makes up to "
                         f"{MAX_PARAMETERS:,} (1 GiB of float32; neural-shading MLPs hold thousands to millions)")
    layers = len(widths) - 1
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:])):
        initial_weight, initial_bias = _initial_layer(rng, fan_in, fan_out, initialisation)
        weight = builder.constant(f"layers.{i}.weight", initial_weight)
        bias = builder.constant(f"layers.{i}.bias", initial_bias)
        last = i == layers - 1
        act = output_act if last else hidden_act
        x = builder.node(Op.LINEAR, f"layers.{i}", [x, weight, bias], output="y" if last else None,
                         **({} if act is None else {"activation": act}))
    return builder.graph([x])


def mlp(in_features: int, hidden: Sequence[int] = (64, 64), out_features: int = 3, *,
        activation: str | Activation | None = "relu", output_activation: str | Activation | None = None,
        encoding: str | Mapping[str, Any] | None = None, octaves: int | None = None, seed: int = 0, name: str = "mlp",
        backend: str = "auto", weights: str = "fp32", device: str | int | None = None,
        initialisation: str = "pytorch") -> Model:
    """An MLP in_features -> hidden... -> out_features, prepared on `backend` like `coopnn.load`.

    `activation` follows every hidden layer and `output_activation` the last (names: `ACTIVATIONS`, or None);
    `hidden=[]` makes one Linear layer. `encoding="frequency"` puts NeRF's positional encoding with `octaves` octaves
    (default 6) before the first layer; a tiny-cuda-nn encoding config (`{"otype": "HashGrid", ...}`, see
    docs/encodings.md) puts that encoding there, its parameters (`encoding.params`) trained with the layers.
    `initialisation` is "pytorch" (nn.Linear's) or "xavier" (tiny-cuda-nn's, biases zero). The input is named "x"
    and the output "y".
    """
    graph = mlp_graph(in_features, hidden, out_features, activation=activation, output_activation=output_activation,
                      encoding=encoding, octaves=octaves, seed=seed, name=name, initialisation=initialisation)
    return prepare(graph, backend=backend, weights=weights, device=device)
