"""SphericalHarmonics: the real harmonics of bands 0 .. degree-1 of the direction 2 x - 1, by the same recurrences as
the encoding's numpy forward (`coopnn.graph.encodings.spherical_harmonics.harmonics`), written out as statements:
cos(m phi) and sin(m phi) terms from x and y, associated Legendre polynomials in z, then each normalised product."""

from __future__ import annotations

import math

from coopnn.export.scalar import literal
from coopnn.graph.encodings.spherical_harmonics import _normalisation


def _azimuthal(x: str, y: str, degree: int, program) -> tuple[list[str], list[str]]:
    """The cos(m phi) and sin(m phi) polynomials in x and y, m < degree."""
    cosine, sine = ["1.0"], ["0.0"]
    for _ in range(1, degree):
        c, s = cosine[-1], sine[-1]
        cosine.append(program.assign(f"{x} * {c} - {y} * {s}"))
        sine.append(program.assign(f"{x} * {s} + {y} * {c}"))
    return cosine, sine


def _legendre(z: str, m: int, degree: int, program) -> dict[int, str]:
    """P_band^m(z) for band m .. degree-1, with the Condon-Shortley phase."""
    polynomials = {m: literal((-1) ** m * math.prod(range(1, 2 * m, 2)))}
    for band in range(m + 1, degree):
        previous = f"{z} * {polynomials[band - 1]} * {literal(2 * band - 1)}"
        if band - 2 >= m:
            previous = f"{previous} - {literal(band + m - 1)} * {polynomials[band - 2]}"
        polynomials[band] = program.assign(f"({previous}) / {literal(band - m)}")
    return polynomials


def _harmonics(encoding, columns, params, program, what):
    x, y, z = (program.assign(f"{c} * 2.0 - 1.0") for c in columns)
    degree = encoding.degree
    cosine, sine = _azimuthal(x, y, degree, program)
    out = [""] * (degree * degree)
    for m in range(degree):
        legendre = _legendre(z, m, degree, program)
        for band in range(m, degree):
            k = _normalisation(band, m)
            if m == 0:
                out[band * band + band] = program.assign(f"{literal(k)} * {legendre[band]}")
                continue
            scaled = literal(math.sqrt(2) * k)
            out[band * band + band + m] = program.assign(f"{scaled} * {legendre[band]} * {cosine[m]}")
            out[band * band + band - m] = program.assign(f"{scaled} * {legendre[band]} * {sine[m]}")
    return out


LOWERINGS = {"SphericalHarmonics": _harmonics}
