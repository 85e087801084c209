"""The encodings' emissions by tiny-cuda-nn `otype`: each module of this package that defines `EMITTERS` (otype ->
function) adds its own; nothing lists them. An emission takes (writer, encoding, the sample's input scalars) and
gives the encoded scalars (float32 ids, `encoding.n_output_dims` of them), computing `encoding.forward` for one
sample in float32."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import Callable, Sequence

from coopnn.errors import CompileError
from coopnn.graph.encodings.base import Encoding
from coopnn.shaders.spirv import Id
from coopnn.shaders.targets.encodings.writer import EncodingWriter

Emission = Callable[[EncodingWriter, Encoding, Sequence[Id]], list]


@functools.cache
def emitters() -> dict[str, Emission]:
    found: dict[str, Emission] = {}
    package = importlib.import_module("coopnn.shaders.targets.encodings")
    for module in pkgutil.iter_modules(package.__path__):
        table = getattr(importlib.import_module(f"{package.__name__}.{module.name}"), "EMITTERS", {})
        for otype, emission in table.items():
            if otype in found:
                raise ValueError(f"encoding otype {otype!r} has two emissions")
            found[otype] = emission
    return found


def emit_encoding(writer: EncodingWriter, encoding: Encoding, xs: Sequence[Id]) -> list[Id]:
    """`encoding` of the sample whose inputs are the float32 scalars `xs`: its outputs, one float32 id each."""
    emission = emitters().get(type(encoding).otype)
    if emission is None:
        raise CompileError(f"the encoding {encoding.describe()} has no SPIR-V emission")
    if len(xs) != encoding.n_input_dims:
        raise ValueError(f"{encoding.describe()} encodes {encoding.n_input_dims} inputs, not {len(xs)}")
    outputs = emission(writer, encoding, list(xs))
    if len(outputs) != encoding.n_output_dims:
        raise ValueError(f"the emission of {encoding.describe()} gave {len(outputs)} outputs, not "
                         f"{encoding.n_output_dims}")
    return outputs
