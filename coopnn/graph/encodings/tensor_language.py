"""TensorLanguage (coopnn's own; no tiny-cuda-nn otype): a tensor-language function of a sample's n inputs (its f32
arguments) to its m features (its f32 results), `coopnn.tl.encoding(text)`; docs/tensor-language.md shows one.

The tl interpreter computes the numpy forward (the oracle); kernels fuse the function's body
(`coopnn/shaders/targets/encodings/tensor_language.py`). It has no parameters; the gradient in its inputs comes
from the function's forward-mode derivatives, one per input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from coopnn.graph.encodings.base import Encoding, as_rows, float32
from coopnn.graph.encodings.config import ConfigReader


def _functions():
    from coopnn.tl.functions import evaluate, function, uses  # coopnn.tl reads the graph IR: imported when used

    return evaluate, function, uses


@dataclass(frozen=True)
class TensorLanguage(Encoding):
    otype = "TensorLanguage"
    function: str = ""  # the text
    name: str | None = None  # the function of the text that encodes (its first by default)

    def __post_init__(self) -> None:
        self.model_function()  # bad text fails here, naming its line and column

    @classmethod
    def from_config(cls, config: Mapping[str, Any], n_input_dims: int, where: str) -> "TensorLanguage":
        keys = ConfigReader(config, where)
        text, name = keys.raw("function"), keys.raw("name")
        if not isinstance(text, str):
            keys.fail("function", f"is the tensor-language text of the function (a str), not {text!r}")
        if name is not None and not isinstance(name, str):
            keys.fail("name", f"names a function of the text (a str), not {name!r}")
        keys.finish()
        return cls(n_input_dims, text, name)

    def model_function(self):
        return _functions()[1].model_function(self.function, self.name, self.n_input_dims, None, "encoding")

    @property
    def n_output_dims(self) -> int:
        return len(self.model_function().results)

    def forward(self, x, params):
        x = as_rows(x, self.n_input_dims)
        results = _functions()[0].evaluate(self.model_function(), *x.T)
        return float32(np.stack(results, axis=1))

    def backward(self, x, params, dy, input_gradient=True):
        x = as_rows(x, self.n_input_dims)
        dx = np.zeros(x.shape, np.float32)
        if input_gradient:
            evaluate, _, uses = _functions()
            dy = np.asarray(dy, np.float64).reshape(len(x), self.n_output_dims)
            for i in range(self.n_input_dims):
                derived = uses.derivative_function(self.function, self.name, None, self.n_input_dims, i, "encoding")
                slopes = np.stack(evaluate.evaluate(derived, *x.T), axis=1)
                dx[:, i] = (dy * slopes).sum(axis=1)
        return np.zeros(0, np.float32), dx

    def to_config(self) -> dict[str, Any]:
        return {"otype": self.otype, "function": self.function, "name": self.name}

    def describe(self) -> str:
        return f"{self.otype}(@{self.model_function().name})"


ENCODINGS = (TensorLanguage,)
