"""ONNX forms of the encodings without parameters: Identity, Frequency (both layouts), TriangleWave and OneBlob."""

from __future__ import annotations

import numpy as np

from coopnn.graph.encodings.frequency import Frequency
from coopnn.graph.encodings.identity import Identity
from coopnn.graph.encodings.oneblob import SHIFTS, OneBlob
from coopnn.graph.encodings.triangle_wave import TriangleWave
from coopnn.graph.onnx.encodings.emit import Emitter


def identity(e: Emitter, encoding: Identity, x: str, params: str | None, output: str) -> None:
    e.last("Add", [e.op("Mul", [x, e.f32(encoding.scale, "scale")]), e.f32(encoding.offset, "offset")], output)


def frequency(e: Emitter, encoding: Frequency, x: str, params: str | None, output: str) -> None:
    d, f = encoding.n_input_dims, encoding.n_frequencies
    phases = e.op("Mul", [e.unsqueeze(x, 2), e.f32(encoding.frequencies(), "frequencies")])  # [batch, d, F]
    if encoding.layout == "tcnn":
        pairs = e.op("Concat", [e.unsqueeze(e.op("Sin", [phases]), 3), e.unsqueeze(e.op("Cos", [phases]), 3)],
                     axis=3)
        e.last("Reshape", [pairs, e.i64([0, 2 * d * f], "shape")], output)
        return
    flat = e.reshape(phases, [0, d * f])
    e.last("Concat", [x, e.op("Sin", [flat]), e.op("Cos", [flat])], output, axis=1)


def triangle_wave(e: Emitter, encoding: TriangleWave, x: str, params: str | None, output: str) -> None:
    octaves = np.arange(encoding.n_frequencies)
    v = e.op("Add", [e.op("Mul", [e.unsqueeze(x, 2), e.f32(np.ldexp(1.0, octaves - 1), "scales")]),
                     e.f32(octaves * 0.25, "shifts")])
    centred = e.op("Sub", [e.op("Sub", [v, e.op("Floor", [v])]), e.f32(0.5)])
    wave = e.op("Sub", [e.op("Mul", [e.op("Abs", [centred]), e.f32(4.0)]), e.f32(1.0)])
    e.last("Reshape", [wave, e.i64([0, encoding.n_output_dims], "shape")], output)


def oneblob(e: Emitter, encoding: OneBlob, x: str, params: str | None, output: str) -> None:
    n = encoding.n_bins
    t = e.op("Sub", [e.f32(np.arange(n + 1) / n, "boundaries"), e.unsqueeze(x, 2)])  # [batch, d, n + 1]
    total = None
    for shift in SHIFTS:
        u = e.op("Mul", [e.op("Add", [t, e.f32(shift, "shift")]) if shift else t, e.f32(n, "bins")])
        u2 = e.op("Mul", [u, u])
        inner = e.op("Add", [e.op("Add", [e.f32(1.0), e.op("Mul", [u2, e.f32(-2 / 3)])]),
                             e.op("Mul", [e.op("Mul", [u2, u2]), e.f32(0.2)])])
        cdf = e.op("Add", [e.op("Mul", [e.op("Mul", [u, inner]), e.f32(15 / 16)]), e.f32(0.5)])
        clipped = e.op("Clip", [cdf, e.f32(0.0), e.f32(1.0)])
        total = clipped if total is None else e.op("Add", [total, clipped])
    mass = e.op("Sub", [e.slice(total, 1, n + 1, 2), e.slice(total, 0, n, 2)])
    e.last("Reshape", [mass, e.i64([0, encoding.n_output_dims], "shape")], output)


WRITERS = {Identity.otype: identity, Frequency.otype: frequency, TriangleWave.otype: triangle_wave,
           OneBlob.otype: oneblob}

