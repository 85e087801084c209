"""Identity: x scale + offset, column by column (`coopnn.graph.encodings.identity`)."""

from __future__ import annotations

from coopnn.graph.encodings.identity import Identity


def identity(w, encoding: Identity, xs: list) -> list:
    return [w.shift(w.scale(x, encoding.scale), encoding.offset) for x in xs]


EMITTERS = {Identity.otype: identity}
