"""Identity (tiny-cuda-nn `Identity`): x * scale + offset, column by column."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from coopnn.graph.encodings.base import Encoding, as_rows, float32
from coopnn.graph.encodings.config import ConfigReader


@dataclass(frozen=True)
class Identity(Encoding):
    otype = "Identity"
    scale: float = 1.0
    offset: float = 0.0

    @classmethod
    def from_config(cls, config: Mapping[str, Any], n_input_dims: int, where: str) -> "Identity":
        keys = ConfigReader(config, where)
        made = cls(n_input_dims, keys.number("scale", 1.0), keys.number("offset", 0.0))
        keys.finish()
        return made

    @property
    def n_output_dims(self) -> int:
        return self.n_input_dims

    def forward(self, x, params):
        return float32(as_rows(x, self.n_input_dims) * np.float32(self.scale) + np.float32(self.offset))

    def backward(self, x, params, dy, input_gradient=True):
        return np.zeros(0, np.float32), float32(dy * np.float32(self.scale))

    def to_config(self) -> dict[str, Any]:
        return {"otype": self.otype, "scale": self.scale, "offset": self.offset}


ENCODINGS = (Identity,)
