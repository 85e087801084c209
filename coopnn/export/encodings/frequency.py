"""Frequency: sin and cos of each input at octave-spaced frequencies, in both of the encoding's layouts, rounded as
its numpy forward rounds (tcnn: x 2^k exactly, then one product with float32 pi; nerf: x times float32 2^k pi)."""

from __future__ import annotations

import math

from coopnn.export.scalar import literal


def _lower(encoding, columns, params, program, what):
    sines, cosines = [], []
    for x in columns:
        for k in range(encoding.n_frequencies):
            if encoding.layout == "tcnn":
                phase = program.assign(f"({x} * {literal(2.0 ** k)}) * {literal(math.pi)}")
            else:
                phase = program.assign(f"{x} * {literal((2.0 ** k) * math.pi)}")
            sines.append(program.assign(f"sin({phase})"))
            cosines.append(program.assign(f"cos({phase})"))
    if encoding.layout == "tcnn":
        return [value for pair in zip(sines, cosines) for value in pair]
    return list(columns) + sines + cosines


LOWERINGS = {"Frequency": _lower}
