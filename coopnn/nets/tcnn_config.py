"""`coopnn.from_tcnn_config`: a whole tiny-cuda-nn JSON config (`encoding`, `network`, `loss`, `optimizer`) made into
a coopnn model and a ready `Trainer`, with an InputError naming the key for what coopnn cannot do.

What maps to what (docs/encodings.md has the table): the encoding is built by `coopnn.graph.encodings`; a
FullyFusedMLP or CutlassMLP of n_hidden_layers layers of n_neurons becomes `coopnn.mlp` layers with tcnn's
Xavier-uniform start and biases starting at zero (tcnn's MLPs have none: coopnn's train, so the two agree at the
start and part as training moves the biases); the loss is coopnn's of the same name; Adam and SGD take tcnn's
learning rate, betas, epsilon and l2_reg, with the L2 term (tcnn decays only its matrices) not applied to the
encoding's parameters.
"""

from __future__ import annotations

from typing import Any, Mapping

from coopnn.errors import InputError
from coopnn.graph.encodings.config import is_finite_number
from coopnn.graph.encodings.registry import from_config as encoding_from_config
from coopnn.graph.ir import Activation, Op
from coopnn.model import Model
from coopnn.nets.builders import MAX_PARAMETERS, mlp
from coopnn.train.losses import Loss, get_loss
from coopnn.train.optim import SGD, Adam, Optimizer
from coopnn.trainer import Trainer

NETWORKS = ("FullyFusedMLP", "CutlassMLP", "MLP", "MegakernelMLP")
FULLY_FUSED_WIDTHS = (16, 32, 64, 128)
ACTIVATIONS = {"none": None, "relu": Activation(Op.RELU), "leakyrelu": Activation(Op.LEAKY_RELU, {"alpha": 0.01}),
               "exponential": Activation(Op.EXP), "sine": Activation(Op.SIN), "sigmoid": Activation(Op.SIGMOID),
               "softplus": Activation(Op.SOFTPLUS, {"beta": 10.0}), "tanh": Activation(Op.TANH)}
LOSSES = {"l2": "l2", "l1": "l1", "relativel2": "relative_l2"}
ADAM_KEYS = {"otype", "learning_rate", "beta1", "beta2", "epsilon", "l2_reg"}
SGD_KEYS = {"otype", "learning_rate", "l2_reg"}


def _section(config: Mapping[str, Any], key: str, required: bool = True) -> Mapping[str, Any]:
    section = config.get(key, None if required else {})
    if not isinstance(section, Mapping):
        raise InputError(f"tiny-cuda-nn config: key {key!r} must be a JSON object, not {section!r}")
    return section


def _name(section: Mapping[str, Any], where: str, default: str | None = None) -> str:
    otype = section.get("otype", default)
    if not isinstance(otype, str):
        raise InputError(f"tiny-cuda-nn config: key '{where}.otype' must be a name, not {otype!r}")
    return otype


def _count(section: Mapping[str, Any], key: str, where: str, default: int) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"tiny-cuda-nn config: key '{where}.{key}' must be a whole number >= 0, not {value!r}")
    return value


def _number(section: Mapping[str, Any], key: str, where: str) -> float:
    value = section[key]
    if not is_finite_number(value):
        raise InputError(f"tiny-cuda-nn config: key '{where}.{key}' must be a finite number, not {value!r}")
    return float(value)


def network_layers(network: Mapping[str, Any]) -> tuple[list[int], Activation | None, Activation | None]:
    """Hidden widths and the activations of tcnn's `network` section."""
    otype = _name(network, "network", "MLP")
    if otype.lower() not in (n.lower() for n in NETWORKS):
        raise InputError(f"tiny-cuda-nn config: key 'network.otype' is {otype!r}; coopnn builds {', '.join(NETWORKS)}")
    known = {"otype", "n_neurons", "n_hidden_layers", "activation", "output_activation", "n_input_dims",
             "n_output_dims"}
    unknown = sorted(set(network) - known)
    if unknown:
        raise InputError(f"tiny-cuda-nn config: key 'network.{unknown[0]}' is not one coopnn reads")
    width, layers = _count(network, "n_neurons", "network", 128), _count(network, "n_hidden_layers", "network", 5)
    fused = otype.lower() in ("fullyfusedmlp", "megakernelmlp")
    if fused and width not in FULLY_FUSED_WIDTHS:
        raise InputError(f"tiny-cuda-nn config: key 'network.n_neurons' is {width}; FullyFusedMLP takes "
                         f"{', '.join(map(str, FULLY_FUSED_WIDTHS))} (CutlassMLP takes any width)")
    if fused and layers < 1:
        raise InputError("tiny-cuda-nn config: key 'network.n_hidden_layers' is 0; FullyFusedMLP needs at least 1")
    if layers * max(width, 1) ** 2 > MAX_PARAMETERS:  # before a list of that many layers is made
        raise InputError(f"tiny-cuda-nn config: key 'network.n_hidden_layers' is {layers:,}: {layers:,} layers of "
                         f"{width} neurons are more than the {MAX_PARAMETERS:,} parameters coopnn.mlp makes")
    return [width] * layers, _activation(network, "activation", "ReLU"), _activation(network, "output_activation",
                                                                                     "None")


def _activation(network: Mapping[str, Any], key: str, default: str) -> Activation | None:
    name = network.get(key, default)
    if not isinstance(name, str) or name.lower() not in ACTIVATIONS:
        raise InputError(f"tiny-cuda-nn config: key 'network.{key}' is {name!r}; coopnn runs "
                         "None, ReLU, LeakyReLU, Exponential, Sine, Sigmoid, Softplus, Tanh")
    return ACTIVATIONS[name.lower()]


def tcnn_loss(config: Mapping[str, Any]) -> Loss:
    section = _section(config, "loss", required=False)
    otype = _name(section, "loss", "L2")
    if otype.lower() not in LOSSES or set(section) - {"otype"}:
        raise InputError(f"tiny-cuda-nn config: key 'loss.otype' is {otype!r} with {sorted(section)}; coopnn "
                         "trains with L2, L1 and RelativeL2 (no further keys)")
    return get_loss(LOSSES[otype.lower()])


def tcnn_optimizer(config: Mapping[str, Any], no_decay: tuple[str, ...]) -> Optimizer:
    section = _section(config, "optimizer", required=False)
    otype = _name(section, "optimizer", "Adam")
    keys = {"adam": ADAM_KEYS, "sgd": SGD_KEYS}.get(otype.lower())
    if keys is None:
        raise InputError(f"tiny-cuda-nn config: key 'optimizer.otype' is {otype!r}; coopnn trains with Adam and SGD "
                         "(nested optimizers such as ExponentialDecay or EMA are not supported)")
    unknown = sorted(set(section) - keys)
    if unknown:
        raise InputError(f"tiny-cuda-nn config: key 'optimizer.{unknown[0]}' is not supported; coopnn's {otype} "
                         f"reads {', '.join(sorted(keys))}")
    number = {k: _number(section, k, "optimizer") for k in keys - {"otype"} if k in section}
    if otype.lower() == "sgd":
        return SGD(lr=number.get("learning_rate", 1e-3), weight_decay=number.get("l2_reg", 1e-8), no_decay=no_decay)
    return Adam(lr=number.get("learning_rate", 1e-3), betas=(number.get("beta1", 0.9), number.get("beta2", 0.999)),
                eps=number.get("epsilon", 1e-8), weight_decay=number.get("l2_reg", 1e-8), no_decay=no_decay)


def from_tcnn_config(config: Mapping[str, Any], n_input_dims: int, n_output_dims: int, *, seed: int = 0,
                     backend: str = "auto", weights: str = "fp32", device: str | int | None = None,
                     **trainer_options: Any) -> tuple[Model, Trainer]:
    """The model tiny-cuda-nn's `config` describes (inputs "x" [batch, n_input_dims], outputs "y" [batch,
    n_output_dims]) and a Trainer with its loss and optimizer."""
    if not isinstance(config, Mapping):
        raise InputError(f"a tiny-cuda-nn config is a JSON object (a dict), not {config!r}")
    unknown = sorted(set(config) - {"encoding", "network", "loss", "optimizer"})
    if unknown:
        raise InputError(f"tiny-cuda-nn config: key {unknown[0]!r} is not one coopnn reads (it reads encoding, "
                         "network, loss, optimizer)")
    encoding = _section(config, "encoding")
    encoding_from_config(encoding, n_input_dims)  # refuse a bad encoding before anything is built
    hidden, activation, output_activation = network_layers(_section(config, "network"))
    model = mlp(n_input_dims, hidden, n_output_dims, activation=activation, output_activation=output_activation,
                encoding=encoding, seed=seed, backend=backend, weights=weights, device=device,
                initialisation="xavier")
    no_decay = tuple(name for name in model.parameters() if name.startswith("encoding."))
    trainer = Trainer(model, tcnn_loss(config), tcnn_optimizer(config, no_decay), seed=seed, **trainer_options)
    return model, trainer
