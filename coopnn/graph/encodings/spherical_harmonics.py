"""SphericalHarmonics (tiny-cuda-nn `SphericalHarmonics`): the real spherical harmonics of bands 0 .. degree-1
(degree 1 to 8, default 4) of a 3-D direction given in [0, 1]^3, mapped to [-1, 1]^3 by 2 x - 1 and not normalised.

Output l^2 + l + m (|m| <= l) is Y_l^m with the Condon-Shortley phase, m < 0 the sine terms and m > 0 the cosine
terms, as tiny-cuda-nn orders and signs them; the polynomials come from the recurrences of Sloan's "Stupid
Spherical Harmonics Tricks" (appendix A1) with x^2 + y^2 + z^2 taken as 1, as tiny-cuda-nn's generated ones are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from coopnn.errors import InputError
from coopnn.graph.encodings.base import Encoding, as_rows, float32
from coopnn.graph.encodings.config import ConfigReader

MAX_DEGREE = 8


def _normalisation(band: int, order: int) -> float:
    return math.sqrt((2 * band + 1) / (4 * math.pi) * math.factorial(band - order) / math.factorial(band + order))


def harmonics(direction: np.ndarray, degree: int) -> np.ndarray:
    """[degree^2, 4, batch]: each harmonic's value and its derivatives in x, y and z, for `direction` [batch, 3] in
    [-1, 1]. Values and derivatives travel together as [value, d/dx, d/dy, d/dz] rows."""
    x, y, z = (np.asarray(direction[:, i], np.float64) for i in range(3))
    one, zero = np.ones_like(x), np.zeros_like(x)
    unit = {"x": np.stack([x, one, zero, zero]), "y": np.stack([y, zero, one, zero]),
            "z": np.stack([z, zero, zero, one])}

    def times(a, b):  # product rule on [value, gradient] rows
        return np.concatenate([a[:1] * b[:1], a[:1] * b[1:] + b[:1] * a[1:]])

    cosine, sine = [np.stack([one, zero, zero, zero])], [np.stack([zero, zero, zero, zero])]
    for m in range(1, degree):
        c, s = cosine[-1], sine[-1]
        cosine.append(times(unit["x"], c) - times(unit["y"], s))
        sine.append(times(unit["x"], s) + times(unit["y"], c))
    out = np.zeros((degree * degree, 4, len(x)))
    for m in range(degree):
        legendre = {m: (-1) ** m * math.prod(range(1, 2 * m, 2)) * np.stack([one, zero, zero, zero])}
        for band in range(m + 1, degree):
            previous = times(unit["z"], legendre[band - 1]) * (2 * band - 1)
            if band - 2 >= m:
                previous = previous - (band + m - 1) * legendre[band - 2]
            legendre[band] = previous / (band - m)
        for band in range(m, degree):
            k = _normalisation(band, m)
            if m == 0:
                out[band * band + band] = k * legendre[band]
                continue
            out[band * band + band + m] = math.sqrt(2) * k * times(legendre[band], cosine[m])
            out[band * band + band - m] = math.sqrt(2) * k * times(legendre[band], sine[m])
    return out


@dataclass(frozen=True)
class SphericalHarmonics(Encoding):
    otype = "SphericalHarmonics"
    pads_in_front = True
    degree: int = 4

    @classmethod
    def from_config(cls, config: Mapping[str, Any], n_input_dims: int, where: str) -> "SphericalHarmonics":
        keys = ConfigReader(config, where)
        degree = keys.integer("degree", 4, 1, MAX_DEGREE)
        keys.finish()
        if n_input_dims != 3:
            raise InputError(f"{where}: SphericalHarmonics encodes 3-D directions; it was given {n_input_dims} "
                             "input dimensions (set n_dims_to_encode, or use a Composite)")
        return cls(n_input_dims, degree)

    @property
    def n_output_dims(self) -> int:
        return self.degree * self.degree

    def _direction(self, x) -> np.ndarray:
        return float32(as_rows(x, 3) * np.float32(2) - np.float32(1))

    def forward(self, x, params):
        return float32(harmonics(self._direction(x), self.degree)[:, 0].T)

    def backward(self, x, params, dy, input_gradient=True):
        gradient = harmonics(self._direction(x), self.degree)[:, 1:]  # [outputs, 3, batch]
        dx = 2 * np.einsum("bo,odb->bd", np.asarray(dy, np.float64), gradient)
        return np.zeros(0, np.float32), float32(dx)

    def to_config(self) -> dict[str, Any]:
        return {"otype": self.otype, "degree": self.degree}


ENCODINGS = (SphericalHarmonics,)
