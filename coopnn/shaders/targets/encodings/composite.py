"""Composite (`coopnn.graph.encodings.composite`): each nested encoding over its columns, reading its own part of
the parameter vector, its output followed by its pad columns (preceded, for an encoding tcnn pads in front of:
SphericalHarmonics)."""

from __future__ import annotations

from coopnn.graph.encodings.composite import Composite
from coopnn.shaders.targets.encodings.registry import emit_encoding


def composite(w, encoding: Composite, xs: list) -> list:
    out, offset = [], 0
    for part in encoding.parts:
        nested = part.encoding
        encoded = emit_encoding(w.offset_by(offset), nested, xs[part.begin:part.begin + nested.n_input_dims])
        pad = [w.constant(nested.pad_value)] * part.pad
        out += pad + encoded if nested.pads_in_front else encoded + pad
        offset += nested.n_parameters
    return out


EMITTERS = {Composite.otype: composite}
