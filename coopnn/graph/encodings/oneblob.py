"""OneBlob (tiny-cuda-nn `OneBlob`, Müller et al. 2019): each input column spread over n_bins (a power of two,
default 16) bins of [0, 1] by a quartic kernel of radius 1/n_bins; output d n_bins + k is the kernel's mass in bin k.

The kernel wraps around: its mass past 1 lands in the first bins and below 0 in the last (tiny-cuda-nn adds the
kernel shifted by -1 and +1), so inputs are periodic with period 1 near the ends of [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from coopnn.graph.encodings.base import Encoding, as_rows, float32
from coopnn.graph.encodings.config import ConfigReader
from coopnn.errors import InputError

MAX_BINS = 1 << 10
SHIFTS = (0.0, -1.0, 1.0)  # the kernel and its two wrapped copies


def quartic_cdf(t: np.ndarray, inverse_radius: float) -> np.ndarray:
    """The integral of the quartic kernel 15/16 (1 - u^2)^2 (u = t / radius) up to t, clamped to [0, 1]."""
    u = t * inverse_radius
    u2 = u * u
    return np.clip(15 / 16 * u * (1 - 2 / 3 * u2 + u2 * u2 / 5) + 0.5, 0.0, 1.0)


def quartic_density(t: np.ndarray, inverse_radius: float) -> np.ndarray:
    """The derivative of `quartic_cdf` in t."""
    inside = np.maximum(1 - (t * inverse_radius) ** 2, 0.0)
    return 15 / 16 * inside * inside * inverse_radius


@dataclass(frozen=True)
class OneBlob(Encoding):
    otype = "OneBlob"
    n_bins: int = 16

    @classmethod
    def from_config(cls, config: Mapping[str, Any], n_input_dims: int, where: str) -> "OneBlob":
        keys = ConfigReader(config, where)
        n_bins = keys.integer("n_bins", 16, 1, MAX_BINS)
        if n_bins & (n_bins - 1):
            raise InputError(f"{where}: key 'n_bins' is {n_bins}; OneBlob takes a power of two (1, 2, 4, ... "
                             f"{MAX_BINS})")
        keys.finish()
        return cls(n_input_dims, n_bins)

    @property
    def n_output_dims(self) -> int:
        return self.n_input_dims * self.n_bins

    def _at_boundaries(self, x: np.ndarray, kernel) -> np.ndarray:
        """[batch, d, n_bins + 1]: `kernel` of (boundary - x) at each bin boundary, wrapped copies added."""
        boundaries = np.arange(self.n_bins + 1) / self.n_bins
        t = boundaries - np.asarray(x, np.float64)[:, :, None]
        return sum(kernel(t + shift, self.n_bins) for shift in SHIFTS)

    def forward(self, x, params):
        x = as_rows(x, self.n_input_dims)
        cdf = self._at_boundaries(x, quartic_cdf)
        return float32(np.diff(cdf, axis=2)).reshape(len(x), -1)

    def backward(self, x, params, dy, input_gradient=True):
        x = as_rows(x, self.n_input_dims)
        density = self._at_boundaries(x, quartic_density)
        per_bin = density[:, :, :-1] - density[:, :, 1:]  # d/dx of cdf(right - x) - cdf(left - x)
        dx = (np.asarray(dy, np.float64).reshape(per_bin.shape) * per_bin).sum(axis=2)
        return np.zeros(0, np.float32), float32(dx)

    def to_config(self) -> dict[str, Any]:
        return {"otype": self.otype, "n_bins": self.n_bins}


ENCODINGS = (OneBlob,)
