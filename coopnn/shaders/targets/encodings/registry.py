"""The encodings' emissions by tiny-cuda-nn `otype`: each module of this package that defines `EMITTERS` (otype ->
function) adds its own; nothing lists them. An emission takes (writer, encoding, the sample's input scalars) and
gives the encoded scalars (float32 ids, `encoding.n_output_dims` of them), computing `encoding.forward` for one
sample in float32."""

from __future__ import annotations

import functools
from typing import Callable, Sequence

from coopnn.errors import CompileError
from coopnn.graph.encodings.base import Encoding
from coopnn.registry import package_tables
from coopnn.shaders.spirv import Id
from coopnn.shaders.targets.encodings.writer import EncodingWriter

Emission = Callable[[EncodingWriter, Encoding, Sequence[Id]], list]


@functools.cache
def emitters() -> dict[str, Emission]:
    return package_tables("coopnn.shaders.targets.encodings", "EMITTERS",
                          lambda module, otypes: f"encoding otypes {sorted(otypes)} have two emissions ({module})")


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
