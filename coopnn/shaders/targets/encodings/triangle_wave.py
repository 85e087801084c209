"""TriangleWave (`coopnn.graph.encodings.triangle_wave`): 4 |v - floor(v) - 1/2| - 1 with v = 2^(k-1) x + k/4."""

from __future__ import annotations

from coopnn.graph.encodings.triangle_wave import TriangleWave


def triangle_wave(w, encoding: TriangleWave, xs: list) -> list:
    out = []
    for x in xs:
        for k in range(encoding.n_frequencies):
            v = w.shift(w.scale(x, 2.0 ** (k - 1)), k * 0.25)
            fraction = w.shift(w.sub(v, w.glsl("Floor", v)), -0.5)
            out.append(w.shift(w.scale(w.glsl("FAbs", fraction), 4.0), -1.0))
    return out


EMITTERS = {TriangleWave.otype: triangle_wave}
