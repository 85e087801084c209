"""Frequency in both layouts (`coopnn.graph.encodings.frequency`): sines and cosines of each input times the
layout's float32 factors 2^k pi. The tcnn layout multiplies x by 2^k (exact) and then by pi, as the numpy forward
rounds it; the nerf layout multiplies by the rounded 2^k pi once."""

from __future__ import annotations

import math

import numpy as np

from coopnn.graph.encodings.frequency import Frequency


def _phases(w, encoding: Frequency, x) -> list:
    if encoding.layout == "tcnn":
        pi = float(np.float32(math.pi))
        return [w.scale(w.scale(x, 2.0 ** k), pi) if k else w.scale(x, pi) for k in range(encoding.n_frequencies)]
    return [w.scale(x, float(f)) for f in encoding.frequencies()]


def frequency(w, encoding: Frequency, xs: list) -> list:
    phases = [_phases(w, encoding, x) for x in xs]
    if encoding.layout == "tcnn":
        return [w.glsl(name, p) for column in phases for p in column for name in ("Sin", "Cos")]
    flat = [p for column in phases for p in column]
    return list(xs) + [w.glsl("Sin", p) for p in flat] + [w.glsl("Cos", p) for p in flat]


EMITTERS = {Frequency.otype: frequency}
