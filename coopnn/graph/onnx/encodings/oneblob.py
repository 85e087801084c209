"""The ONNX form of OneBlob: the quartic kernel's clamped integral at each bin boundary, its wrapped copies added,
differenced between neighbouring boundaries."""

from __future__ import annotations

import numpy as np

from coopnn.graph.encodings.oneblob import SHIFTS, OneBlob
from coopnn.graph.onnx.encodings.emit import Emitter


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


WRITERS = {OneBlob.otype: oneblob}
