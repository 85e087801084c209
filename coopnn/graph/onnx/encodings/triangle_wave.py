"""The ONNX form of TriangleWave: 4 |v - floor(v) - 1/2| - 1 of v = 2^(k-1) x + k/4, elementwise."""

from __future__ import annotations

import numpy as np

from coopnn.graph.encodings.triangle_wave import TriangleWave
from coopnn.graph.onnx.encodings.emit import Emitter


def triangle_wave(e: Emitter, encoding: TriangleWave, x: str, params: str | None, output: str) -> None:
    octaves = np.arange(encoding.n_frequencies)
    v = e.op("Add", [e.op("Mul", [e.unsqueeze(x, 2), e.f32(np.ldexp(1.0, octaves - 1), "scales")]),
                     e.f32(octaves * 0.25, "shifts")])
    centred = e.op("Sub", [e.op("Sub", [v, e.op("Floor", [v])]), e.f32(0.5)])
    wave = e.op("Sub", [e.op("Mul", [e.op("Abs", [centred]), e.f32(4.0)]), e.f32(1.0)])
    e.last("Reshape", [wave, e.i64([0, encoding.n_output_dims], "shape")], output)


WRITERS = {TriangleWave.otype: triangle_wave}
