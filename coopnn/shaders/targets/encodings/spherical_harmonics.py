"""SphericalHarmonics (`coopnn.graph.encodings.spherical_harmonics`): the real harmonics of the direction 2 x - 1,
by the same recurrences as the numpy forward (Sloan's, x^2 + y^2 + z^2 taken as 1), in float32.

Values are carried as a float constant times a SPIR-V value (or the constant alone), so the recurrences' constant
factors (the double factorials, the normalisations) are folded on the host and only products of values are emitted.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from coopnn.graph.encodings.spherical_harmonics import SphericalHarmonics, _normalisation


class Scaled(NamedTuple):
    """factor times value (value None: the constant factor)."""

    factor: float
    value: object = None


def _times(w, a: Scaled, b: Scaled) -> Scaled:
    if a.value is None or b.value is None:
        return Scaled(a.factor * b.factor, a.value if b.value is None else b.value)
    return Scaled(a.factor * b.factor, w.mul(a.value, b.value))


def _emit(w, a: Scaled):
    if a.value is None:
        return w.constant(a.factor)
    return a.value if a.factor == 1.0 else w.scale(a.value, a.factor)


def _combine(w, a: Scaled, b: Scaled, sign: float) -> Scaled:
    """a + sign b."""
    if a.value is None and b.value is None:
        return Scaled(a.factor + sign * b.factor)
    if a.factor == 0.0:
        return Scaled(sign * b.factor, b.value)
    if b.factor == 0.0:
        return a
    return Scaled(1.0, w.scalars.binary("add" if sign > 0 else "sub", _emit(w, a), _emit(w, b)))


def _azimuthal(w, x: Scaled, y: Scaled, degree: int) -> tuple[list, list]:
    """cos(m phi) and sin(m phi) times the horizontal extent^m, as polynomials of x and y, for m < degree."""
    cosine, sine = [Scaled(1.0)], [Scaled(0.0)]
    for m in range(1, degree):
        c, s = cosine[-1], sine[-1]
        cosine.append(_combine(w, _times(w, x, c), _times(w, y, s), -1.0))
        sine.append(_combine(w, _times(w, x, s), _times(w, y, c), 1.0))
    return cosine, sine


def _legendre(w, z: Scaled, m: int, degree: int) -> dict:
    """The associated Legendre polynomials P_l^m(z) for l from m to degree - 1."""
    polys = {m: Scaled((-1) ** m * math.prod(range(1, 2 * m, 2)))}
    for band in range(m + 1, degree):
        term = _times(w, z, polys[band - 1])
        term = Scaled(term.factor * (2 * band - 1) / (band - m), term.value)
        if band - 2 >= m:
            older = polys[band - 2]
            term = _combine(w, term, Scaled(older.factor * (band + m - 1) / (band - m), older.value), -1.0)
        polys[band] = term
    return polys


def spherical_harmonics(w, encoding: SphericalHarmonics, xs: list) -> list:
    degree = encoding.degree
    x, y, z = (Scaled(1.0, w.shift(w.scale(v, 2.0), -1.0)) for v in xs)
    cosine, sine = _azimuthal(w, x, y, degree)
    out: list = [None] * (degree * degree)
    for m in range(degree):
        for band, poly in _legendre(w, z, m, degree).items():
            k = _normalisation(band, m)
            centre = band * band + band
            if m == 0:
                out[centre] = _emit(w, Scaled(k * poly.factor, poly.value))
                continue
            scaled = Scaled(math.sqrt(2) * k * poly.factor, poly.value)
            out[centre + m] = _emit(w, _times(w, scaled, cosine[m]))
            out[centre - m] = _emit(w, _times(w, scaled, sine[m]))
    return out


EMITTERS = {SphericalHarmonics.otype: spherical_harmonics}
