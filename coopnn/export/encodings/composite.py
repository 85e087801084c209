"""Composite: each nested encoding on its own input columns and its own span of the parameters (in order, as the
composite lays them out), its output followed by the pad columns tiny-cuda-nn writes (the nested encoding's pad
value)."""

from __future__ import annotations

from coopnn.export.scalar import literal


def _composite(encoding, columns, params, program, what):
    from coopnn.export.encodings import lower_encoding

    out, start = [], 0
    for i, part in enumerate(encoding.parts):
        nested = part.encoding
        own = columns[part.begin:part.begin + nested.n_input_dims]
        parameters, start = params[start:start + nested.n_parameters], start + nested.n_parameters
        out += lower_encoding(nested, own, parameters, program, f"{what} (nested encoding {i})")
        out += [literal(nested.pad_value)] * part.pad
    return out


LOWERINGS = {"Composite": _composite}
