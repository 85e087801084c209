"""The ONNX form of Frequency: both layouts: the phases x 2^k pi as one Mul against a constant, then Sin and Cos,
interleaved (tcnn) or in blocks after x (nerf)."""

from __future__ import annotations

from coopnn.graph.encodings.frequency import Frequency
from coopnn.graph.onnx.encodings.emit import Emitter


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


WRITERS = {Frequency.otype: frequency}
