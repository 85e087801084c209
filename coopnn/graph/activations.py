"""The activations, each declared once: the elementwise unary float operators a LINEAR may fuse. A row holds the
operator's float32 numpy reference, whose keyword defaults are the attribute defaults every reader takes
(`coopnn.graph.ops.forward_defaults`), and the ONNX operator of the same meaning.

Readers: `coopnn.graph.ops` registers each row as a unary operator (the numpy backend's semantics); the ONNX importer
(`onnx/converters/activations.py`) and exporter (`onnx/export.py`) map them by `onnx`; the kernel level writes them as
kernel instructions (`coopnn.shaders.kernel.activations`) and differentiates them (`coopnn.shaders.kernel.derivatives`,
whose rules the numpy backend's training evaluates too); `coopnn.bench.torch_graph` calls the PyTorch equivalent.
`tests/graph/test_activations.py` checks that every reader covers every row; `coopnn/shaders/kernel/README.md` says
how to add one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from coopnn.graph.ir import Op

Array = np.ndarray


@dataclass(frozen=True)
class Onnx:
    """The ONNX operator meaning what the activation means, with its attributes under the same names and defaults."""

    op_type: str
    since: tuple[int, ...]  # the operator versions the importer takes
    attributes: tuple[str, ...] = ()  # the activation's attributes ONNX carries; others keep their defaults on import


@dataclass(frozen=True)
class ActivationDef:
    op: Op
    forward: Callable[..., Array]  # the float32 numpy reference; its keyword defaults are the attribute defaults
    onnx: Onnx | None  # None: no ONNX operator has this meaning and these attributes (the exporter composes one)
    required: tuple[str, ...] = ()  # attributes it cannot run without (so a name alone does not make it)


def f32(x: Array) -> Array:
    """The result rounded to float32, as every operator gives it (tests computing in float64 replace this)."""
    return np.asarray(x, dtype=np.float32)


# the tanh form of GELU: 0.5 x (1 + tanh(SQRT_2_OVER_PI (x + GELU_TANH_COEFFICIENT x^3)))
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_TANH_COEFFICIENT = 0.044715


def _erf(x: Array) -> Array:
    # np has no erf; math.erf per element is exact and fast enough for a reference backend on chunked batches.
    return f32(np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)).astype(np.float64))


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return f32(0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_COEFFICIENT * x**3))))
    return f32(0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0)))))


def _softplus(x, beta=1.0, threshold=None):
    out = np.logaddexp(np.float32(0), beta * x) / np.float32(beta)
    if threshold is not None:
        out = np.where(beta * x > threshold, x, out)
    return f32(out)


def _sigmoid(x):
    # exp of -|x| never overflows, so large inputs of either sign saturate cleanly
    e = np.exp(-np.abs(x))
    return f32(np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)))


def _clip(x, min=None, max=None):
    lo = -np.inf if min is None else min
    hi = np.inf if max is None else max
    return f32(np.minimum(np.maximum(x, np.float32(lo)), np.float32(hi)))


def _selu(x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return f32(np.float32(gamma) * np.where(x > 0, x, np.float32(alpha) * np.expm1(x)))


def _tl_function(x, text=None, function=None, derivative=None):
    """The tensor-language function `function` of `text` on every element, run by the tl interpreter (the oracle)."""
    from coopnn.tl.functions import evaluate, named

    return evaluate.evaluate(named.activation_function(text, function), x)[0]


ACTIVATIONS: dict[Op, ActivationDef] = {}


def _activation(op: Op, forward: Callable[..., Array], onnx: Onnx | None, required: tuple[str, ...] = ()) -> None:
    ACTIVATIONS[op] = ActivationDef(op, forward, onnx, required)


_activation(Op.RELU, lambda x: f32(np.maximum(x, np.float32(0))), Onnx("Relu", (6, 13, 14)))
_activation(Op.LEAKY_RELU, lambda x, alpha=0.01: f32(np.where(x >= 0, x, np.float32(alpha) * x)),
            Onnx("LeakyRelu", (6, 16), ("alpha",)))
_activation(Op.ELU, lambda x, alpha=1.0: f32(np.where(x > 0, x, np.float32(alpha) * np.expm1(x))),
            Onnx("Elu", (6, 22), ("alpha",)))
_activation(Op.SELU, _selu, Onnx("Selu", (6, 22), ("alpha", "gamma")))
_activation(Op.CELU,
            lambda x, alpha=1.0: f32(np.maximum(x, 0) + np.minimum(0, np.float32(alpha) * np.expm1(x / alpha))),
            Onnx("Celu", (12, 28), ("alpha",)))
_activation(Op.SIGMOID, _sigmoid, Onnx("Sigmoid", (6, 13)))
_activation(Op.HARD_SIGMOID,
            lambda x, alpha=0.2, beta=0.5: f32(np.clip(np.float32(alpha) * x + np.float32(beta), 0, 1)),
            Onnx("HardSigmoid", (6, 22), ("alpha", "beta")))
_activation(Op.HARD_SWISH, lambda x: f32(x * np.clip(x / np.float32(6) + np.float32(0.5), 0, 1)),
            Onnx("HardSwish", (14, 22)))
_activation(Op.TANH, lambda x: f32(np.tanh(x)), Onnx("Tanh", (6, 13)))
# ONNX's Softplus has neither beta nor threshold: the exporter writes those as Mul, Div and Where around it
_activation(Op.SOFTPLUS, _softplus, Onnx("Softplus", (1, 22)))
_activation(Op.SOFTSIGN, lambda x: f32(x / (1 + np.abs(x))), Onnx("Softsign", (1, 22)))
_activation(Op.GELU, _gelu, Onnx("Gelu", (20,), ("approximate",)))
_activation(Op.SILU, lambda x: f32(x * _sigmoid(x)), None)  # exported as x * Sigmoid(x)
_activation(Op.MISH, lambda x: f32(x * np.tanh(_softplus(x))), Onnx("Mish", (18, 22)))
_activation(Op.CLIP, _clip, None)  # ONNX's Clip takes its bounds as inputs from opset 11: converters of their own
_activation(Op.EXP, lambda x: f32(np.exp(x)), Onnx("Exp", (6, 13)))
_activation(Op.LOG, lambda x: f32(np.log(x)), Onnx("Log", (6, 13)))
_activation(Op.SIN, lambda x: f32(np.sin(x)), Onnx("Sin", (7, 22)))
_activation(Op.COS, lambda x: f32(np.cos(x)), Onnx("Cos", (7, 22)))
_activation(Op.NEG, lambda x: f32(-x), Onnx("Neg", (6, 13)))
_activation(Op.ABS, lambda x: f32(np.abs(x)), Onnx("Abs", (6, 13)))
_activation(Op.SQRT, lambda x: f32(np.sqrt(x)), Onnx("Sqrt", (6, 13)))
_activation(Op.RECIPROCAL, lambda x: f32(np.float32(1) / x), Onnx("Reciprocal", (6, 13)))
_activation(Op.ERF, _erf, Onnx("Erf", (9, 13)))
_activation(Op.FLOOR, lambda x: f32(np.floor(x)), Onnx("Floor", (6, 13)))
_activation(Op.CEIL, lambda x: f32(np.ceil(x)), Onnx("Ceil", (6, 13)))
_activation(Op.SIGN, lambda x: f32(np.sign(x)), Onnx("Sign", (9, 13)))
# ONNX has no operator running tensor-language text: the exporter refuses it, naming the node
_activation(Op.TL_FUNCTION, _tl_function, None, ("text",))
