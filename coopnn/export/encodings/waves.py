"""The parameter-free encodings of one expression per output: Identity (x scale + offset) and TriangleWave
(4 |v - floor(v) - 1/2| - 1 with v = 2^(k-1) x + k/4, column-major as tiny-cuda-nn writes it)."""

from __future__ import annotations

from coopnn.export.scalar import literal


def _identity(encoding, columns, params, program, what):
    return [program.assign(f"{x} * {literal(encoding.scale)} + {literal(encoding.offset)}") for x in columns]


def _triangle_wave(encoding, columns, params, program, what):
    out = []
    for x in columns:
        for k in range(encoding.n_frequencies):
            v = program.assign(f"{x} * {literal(2.0 ** (k - 1))} + {literal(k * 0.25)}")
            out.append(program.assign(f"abs({v} - floor({v}) - 0.5) * 4.0 - 1.0"))
    return out


LOWERINGS = {"Identity": _identity, "TriangleWave": _triangle_wave}
