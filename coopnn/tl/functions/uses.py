"""The three uses of a model function, made from its text: an activation (one argument, one result), an input
encoding (n arguments, m results) and a loss (prediction and target, one result), and the derivative functions
training takes: the text's function named `derivative` where given (same arguments, one result: the derivative in
the first argument), else the one `differentiate` derives."""

from __future__ import annotations

import functools
from typing import Any

from coopnn.errors import InputError
from coopnn.graph.ir import Activation, Op
from coopnn.tl import ast
from coopnn.tl.functions.differentiate import derivative as differentiated
from coopnn.tl.functions.function import model_function

ENCODING_OTYPE = "TensorLanguage"


def _text(text: Any, use: str) -> str:
    if not isinstance(text, str):
        raise InputError(f"a tensor-language {use} is made from its text (a str), not {type(text).__name__}; "
                         f"docs/tensor-language.md shows one")
    return text


def activation_function(text: str, function: str | None = None) -> ast.Function:
    return model_function(_text(text, "activation"), function, 1, 1, "activation")


def loss_function(text: str, function: str | None = None) -> ast.Function:
    return model_function(_text(text, "loss"), function, 2, 1, "loss")


@functools.lru_cache(maxsize=256)
def derivative_function(text: str, function: str | None, derivative: str | None, arguments: int, wrt: int = 0,
                        use: str = "activation") -> ast.Function:
    """d result / d argument `wrt` of the function: the text's `derivative` (only for `wrt` 0), else derived."""
    if derivative is not None and wrt == 0:
        forward = model_function(text, function, arguments, None, use)
        return model_function(text, derivative, arguments, len(forward.results), f"derivative of a {use}")
    return differentiated(model_function(text, function, arguments, None, use), wrt)


def activation(text: str, derivative: str | None = None, function: str | None = None) -> Activation:
    """The elementwise activation computing the function `function` (the text's first by default) of `text`: one f32
    argument, one f32 result; `derivative` names the text's function giving its derivative (else it is derived)."""
    activation_function(text, function)
    if derivative is not None:
        derivative_function(text, function, derivative, 1)
    return Activation(Op.TL_FUNCTION, {"text": text, "function": function, "derivative": derivative})


def encoding(text: str, function: str | None = None) -> dict:
    """The encoding config (for `coopnn.mlp(..., encoding=...)`) computing the function of `text` from a sample's n
    inputs (its f32 arguments) to its m features (its f32 results)."""
    model_function(_text(text, "encoding"), function, None, None, "encoding")
    return {"otype": ENCODING_OTYPE, "function": text, "name": function}


def loss(text: str, derivative: str | None = None, function: str | None = None):
    """The training loss whose per-element term is the function of `text` of (prediction, target)."""
    from coopnn.train.losses import TensorLanguageLoss  # which reads this module

    return TensorLanguageLoss(_text(text, "loss"), function, derivative)
