"""TriangleWave (tiny-cuda-nn `TriangleWave`): n_frequencies (default 12) triangle waves per input column.

Output d F + k is 4 |v - floor(v) - 1/2| - 1 with v = 2^(k-1) x_d + k / 4: a wave of period 2^(1-k) in x, each
octave shifted by a quarter period; width d F, column-major like Frequency's tcnn layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from coopnn.graph.encodings.base import Encoding, as_rows, float32
from coopnn.graph.encodings.config import ConfigReader

MAX_FREQUENCIES = 64


@dataclass(frozen=True)
class TriangleWave(Encoding):
    otype = "TriangleWave"
    n_frequencies: int = 12

    @classmethod
    def from_config(cls, config: Mapping[str, Any], n_input_dims: int, where: str) -> "TriangleWave":
        keys = ConfigReader(config, where)
        made = cls(n_input_dims, keys.integer("n_frequencies", 12, 1, MAX_FREQUENCIES))
        keys.finish()
        return made

    @property
    def n_output_dims(self) -> int:
        return self.n_input_dims * self.n_frequencies

    def _waves(self, x: np.ndarray) -> np.ndarray:
        """[batch, d, F] float32 v = 2^(k-1) x + k/4, rounded as tiny-cuda-nn rounds it (the scaling is exact)."""
        octaves = np.arange(self.n_frequencies)
        return float32(np.ldexp(x[:, :, None], octaves - 1) + float32(octaves * 0.25))

    def forward(self, x, params):
        x = as_rows(x, self.n_input_dims)
        v = self._waves(x)
        return float32(np.abs(v - np.floor(v) - np.float32(0.5)) * np.float32(4) - np.float32(1)).reshape(len(x), -1)

    def backward(self, x, params, dy, input_gradient=True):
        x = as_rows(x, self.n_input_dims)
        v = self._waves(x)
        rising = np.floor(v * 2).astype(np.int64) % 2 == 1  # the second half of each period
        slope = np.where(rising, 1.0, -1.0) * np.ldexp(1.0, np.arange(self.n_frequencies) + 1)
        dx = (np.asarray(dy, np.float64).reshape(v.shape) * slope).sum(axis=2)
        return np.zeros(0, np.float32), float32(dx)

    def to_config(self) -> dict[str, Any]:
        return {"otype": self.otype, "n_frequencies": self.n_frequencies}


ENCODINGS = (TriangleWave,)
