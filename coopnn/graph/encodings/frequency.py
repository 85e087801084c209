"""Frequency: sines and cosines of the inputs at octave-spaced frequencies, in one of two layouts.

- "tcnn" (tiny-cuda-nn `Frequency`, what a config with otype Frequency gets): n_frequencies (default 12) pairs per
  input column, column-major: output 2 (d F + k) is sin(2^k pi x_d) and 2 (d F + k) + 1 is cos(2^k pi x_d) (tcnn
  writes it as sin(2^k pi x_d + pi/2)); width 2 F d; no copy of x.
- "nerf" (what `coopnn.mlp(encoding="frequency")` has always built, NeRF's positional encoding): [x, sin(2^k pi x_d)
  for d, k, cos(2^k pi x_d) for d, k] with d outer and k inner in each block; width d (1 + 2 F).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from coopnn.graph.encodings.base import Encoding, as_rows, float32
from coopnn.graph.encodings.config import ConfigReader

LAYOUTS = ("tcnn", "nerf")
DEFAULTS = {"tcnn": 12, "nerf": 6}  # tiny-cuda-nn's n_frequencies; coopnn's octaves
MAX_FREQUENCIES = 64


@dataclass(frozen=True)
class Frequency(Encoding):
    otype = "Frequency"
    n_frequencies: int = 12
    layout: str = "tcnn"

    @classmethod
    def from_config(cls, config: Mapping[str, Any], n_input_dims: int, where: str) -> "Frequency":
        keys = ConfigReader(config, where)
        layout = keys.choice("layout", "tcnn", LAYOUTS)
        made = cls(n_input_dims, keys.integer("n_frequencies", DEFAULTS[layout], 1, MAX_FREQUENCIES), layout)
        keys.finish()
        return made

    @property
    def n_output_dims(self) -> int:
        pairs = 2 * self.n_input_dims * self.n_frequencies
        return pairs + (self.n_input_dims if self.layout == "nerf" else 0)

    def _phases(self, x: np.ndarray) -> np.ndarray:
        """[batch, d, F] float32 arguments 2^k pi x_d, rounded as each layout rounds them."""
        octaves = np.arange(self.n_frequencies)
        if self.layout == "tcnn":  # x 2^k is exact; the product with float32 pi is rounded once
            return float32(np.ldexp(x[:, :, None], octaves) * np.float32(math.pi))
        return float32(x[:, :, None] * float32((2.0 ** octaves) * math.pi))

    def frequencies(self) -> np.ndarray:
        """The float32 factors 2^k pi the layout multiplies x by."""
        if self.layout == "tcnn":
            return float32(np.ldexp(np.float32(math.pi), np.arange(self.n_frequencies)))
        return float32((2.0 ** np.arange(self.n_frequencies)) * math.pi)

    def forward(self, x, params):
        x = as_rows(x, self.n_input_dims)
        phases = self._phases(x).astype(np.float64)
        sines, cosines = float32(np.sin(phases)), float32(np.cos(phases))
        batch = x.shape[0]
        if self.layout == "tcnn":
            return np.stack([sines, cosines], axis=-1).reshape(batch, -1)
        return np.concatenate([x, sines.reshape(batch, -1), cosines.reshape(batch, -1)], axis=1)

    def backward(self, x, params, dy, input_gradient=True):
        x = as_rows(x, self.n_input_dims)
        batch, phases = x.shape[0], self._phases(x).astype(np.float64)
        scale = self.frequencies().astype(np.float64)
        d_sin, d_cos = np.cos(phases) * scale, -np.sin(phases) * scale
        dy = np.asarray(dy, np.float64)
        if self.layout == "tcnn":
            pairs = dy.reshape(batch, self.n_input_dims, self.n_frequencies, 2)
            dx = (pairs[..., 0] * d_sin + pairs[..., 1] * d_cos).sum(axis=2)
        else:
            d, block = self.n_input_dims, self.n_input_dims * self.n_frequencies
            sines = dy[:, d:d + block].reshape(batch, d, -1)
            cosines = dy[:, d + block:].reshape(batch, d, -1)
            dx = dy[:, :d] + (sines * d_sin + cosines * d_cos).sum(axis=2)
        return np.zeros(0, np.float32), float32(dx)

    def to_config(self) -> dict[str, Any]:
        return {"otype": self.otype, "n_frequencies": self.n_frequencies, "layout": self.layout}


ENCODINGS = (Frequency,)
