"""TensorLanguage (`coopnn.graph.encodings.tensor_language`): the function's body as float32 SPIR-V scalars."""

from __future__ import annotations

from coopnn.graph.encodings.tensor_language import TensorLanguage


def tensor_language(w, encoding: TensorLanguage, xs: list) -> list:
    return list(w.scalars.function(encoding.model_function(), *xs))


EMITTERS = {TensorLanguage.otype: tensor_language}
