"""The three uses of a model function, made from its text: an elementwise activation, an input encoding config and a
training loss (`named` checks the text and finds the functions and derivatives each use takes)."""

from __future__ import annotations

from coopnn.graph.ir import Activation, Op
from coopnn.tl.functions.function import model_function
from coopnn.tl.functions.named import ENCODING_OTYPE, text_of, activation_function, derivative_function, name_of

def activation(text: str, derivative: str | None = None, function: str | None = None) -> Activation:
    """The elementwise activation computing the function `function` (the text's first by default) of `text`: one f32
    argument, one f32 result; `derivative` names the text's function giving its derivative (else it is derived)."""
    activation_function(text, function)
    if derivative is not None:
        derivative_function(text, function, name_of(derivative, "activation's derivative"), 1)
    return Activation(Op.TL_FUNCTION, {"text": text, "function": function, "derivative": derivative})


def encoding(text: str, function: str | None = None) -> dict:
    """The encoding config (for `coopnn.mlp(..., encoding=...)`) computing the function of `text` from a sample's n
    inputs (its f32 arguments) to its m features (its f32 results)."""
    model_function(text_of(text, "encoding"), name_of(function, "encoding's function"), None, None, "encoding")
    return {"otype": ENCODING_OTYPE, "function": text, "name": function}


def loss(text: str, derivative: str | None = None, function: str | None = None):
    """The training loss whose per-element term is the function of `text` of (prediction, target)."""
    from coopnn.train.losses import TensorLanguageLoss  # which reads this module

    return TensorLanguageLoss(text_of(text, "loss"), function, derivative)
