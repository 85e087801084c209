"""The ONNX form of Identity: x * scale + offset as Mul and Add."""

from __future__ import annotations

from coopnn.graph.encodings.identity import Identity
from coopnn.graph.onnx.encodings.emit import Emitter


def identity(e: Emitter, encoding: Identity, x: str, params: str | None, output: str) -> None:
    e.last("Add", [e.op("Mul", [x, e.f32(encoding.scale, "scale")]), e.f32(encoding.offset, "offset")], output)


WRITERS = {Identity.otype: identity}
