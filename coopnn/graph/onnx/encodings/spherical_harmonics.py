"""The ONNX form of SphericalHarmonics: the direction 2 x - 1 split into columns, the same recurrences as
`coopnn.graph.encodings.spherical_harmonics` written as elementwise operators, one column per harmonic."""

from __future__ import annotations

import math

from coopnn.graph.encodings.spherical_harmonics import SphericalHarmonics, _normalisation
from coopnn.graph.onnx.encodings.emit import Emitter


def spherical_harmonics(e: Emitter, encoding: SphericalHarmonics, x: str, params: str | None, output: str) -> None:
    degree = encoding.degree
    direction = e.op("Sub", [e.op("Mul", [x, e.f32(2.0)]), e.f32(1.0)])
    cx, cy, cz = (e.column(direction, i, 1) for i in range(3))  # [batch] each
    one = e.op("Add", [e.op("Mul", [cx, e.f32(0.0)]), e.f32(1.0)])
    cosine, sine = [one], [None]
    for m in range(1, degree):
        c, s = cosine[-1], sine[-1]
        cosine.append(e.op("Mul", [cx, c]) if s is None else
                      e.op("Sub", [e.op("Mul", [cx, c]), e.op("Mul", [cy, s])]))
        sine.append(e.op("Mul", [cy, c]) if s is None else
                    e.op("Add", [e.op("Mul", [cx, s]), e.op("Mul", [cy, c])]))
    columns: dict[int, str] = {}
    for m in range(degree):
        legendre = {m: (-1) ** m * math.prod(range(1, 2 * m, 2))}  # numbers while constant, then ONNX values
        for band in range(m + 1, degree):
            legendre[band] = _legendre_step(e, legendre, band, m, cz, one)
        for band in range(m, degree):
            factor = _normalisation(band, m) * (1 if m == 0 else math.sqrt(2))
            p = legendre[band]
            centre = band * band + band
            terms = [(centre, cosine[0])] if m == 0 else [(centre + m, cosine[m]), (centre - m, sine[m])]
            for index, trig in terms:
                scaled = e.op("Mul", [trig, e.f32(factor * p)]) if isinstance(p, (int, float)) else \
                    e.op("Mul", [e.op("Mul", [p, trig]), e.f32(factor)])
                columns[index] = e.unsqueeze(scaled, 1)
    e.last("Concat", [columns[i] for i in range(degree * degree)], output, axis=1)


def _legendre_step(e: Emitter, legendre: dict, band: int, m: int, cz: str, one: str):
    """P_band^m from the two before it: ((2 band - 1) z P_(band-1) - (band + m - 1) P_(band-2)) / (band - m)."""
    previous = legendre[band - 1]
    term = e.op("Mul", [cz, e.f32(previous * (2 * band - 1))]) if isinstance(previous, (int, float)) else \
        e.op("Mul", [e.op("Mul", [cz, previous]), e.f32(2 * band - 1)])
    if band - 2 >= m:
        before = legendre[band - 2]
        older = e.op("Mul", [one, e.f32(before * (band + m - 1))]) if isinstance(before, (int, float)) else \
            e.op("Mul", [before, e.f32(band + m - 1)])
        term = e.op("Sub", [term, older])
    return e.op("Mul", [term, e.f32(1 / (band - m))])


WRITERS = {SphericalHarmonics.otype: spherical_harmonics}
