"""The checked function a model's tensor-language text names for each use (an activation: one argument, one
result; a loss: prediction and target, one result; an encoding: n arguments, m results), and the derivative
functions training takes: the text's function named `derivative` where given (same arguments, one result: the
derivative in the first argument), else the one `differentiate` derives. The graph, kernel and training layers read
these; `uses` makes the model parts from them."""

from __future__ import annotations

import functools
from typing import Any

from coopnn.errors import InputError
from coopnn.tl import ast
from coopnn.tl.functions.differentiate import derivative as differentiated
from coopnn.tl.functions.function import model_function

ENCODING_OTYPE = "TensorLanguage"


def text_of(text: Any, use: str) -> str:
    if not isinstance(text, str):
        raise InputError(f"a tensor-language {use} is made from its text (a str), not {type(text).__name__}; "
                         f"docs/tensor-language.md shows one")
    return text


def name_of(name: Any, role: str) -> str | None:
    """`name` (a function of the text, for `role`) checked before the cached look-ups, which need it hashable."""
    if name is not None and not isinstance(name, str):
        raise InputError(f"the {role} names a function of the text (a str, such as 'logistic'), not {name!r}")
    return name


def activation_function(text: str, function: str | None = None) -> ast.Function:
    return model_function(text_of(text, "activation"), name_of(function, "activation's function"), 1, 1,
                          "activation")


def loss_function(text: str, function: str | None = None) -> ast.Function:
    return model_function(text_of(text, "loss"), name_of(function, "loss's function"), 2, 1, "loss")


@functools.lru_cache(maxsize=256)
def derivative_function(text: str, function: str | None, derivative: str | None, arguments: int, wrt: int = 0,
                        use: str = "activation") -> ast.Function:
    """d result / d argument `wrt` of the function: the text's `derivative` (only for `wrt` 0), else derived."""
    if derivative is not None and wrt == 0:
        forward = model_function(text, function, arguments, None, use)
        return model_function(text, derivative, arguments, len(forward.results), f"derivative of a {use}")
    return differentiated(model_function(text, function, arguments, None, use), wrt)
