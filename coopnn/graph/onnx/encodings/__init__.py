"""Encodings in standard ONNX operators, one module per encoding,
each defining `WRITERS` (otype -> writer), found here: `write_encoding` writes an ENCODING node's subgraph."""

from __future__ import annotations

import functools
from typing import Callable

from coopnn.errors import CompileError
from coopnn.graph.encodings.base import Encoding
from coopnn.graph.onnx.encodings.emit import Emitter, Writer
from coopnn.registry import package_tables


@functools.cache
def _writers() -> dict[str, Callable]:
    return package_tables(__name__, "WRITERS", lambda module, otypes: f"{module} writes {sorted(otypes)} again")


def write_encoding(writer: Writer, encoding: Encoding, x: str, params: str | None, output: str, name: str) -> None:
    """Write `encoding` of the value `x` (and the parameter vector `params`) as the value `output`, every node
    named `name` or `name/...`."""
    write = _writers().get(encoding.otype)
    if write is None:
        raise CompileError(f"node {name!r}: the encoding {encoding.otype} has no ONNX form")
    write(Emitter(writer, name), encoding, x, params, output)
