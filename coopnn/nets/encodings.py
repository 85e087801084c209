"""Input encodings built as graph IR, by name: what `coopnn.mlp(encoding=...)` puts before the first layer.

Each encoding takes the builder, the name of a [batch, d] value and its options, and returns the name and width of
the encoded [batch, width] value. The encodings have no parameters, so training never differentiates through them.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import numpy as np

from coopnn.errors import InputError
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.ir import Op

DEFAULT_OCTAVES = 6


def frequency(builder: GraphBuilder, x: str, octaves: int | None = None) -> tuple[str, int]:
    """NeRF's positional encoding [x, sin(x 2^k pi), cos(x 2^k pi)] for k < octaves, in the form the zoo exports
    (x as [batch, d, 1] times the frequencies, flattened back to [batch, d * octaves])."""
    octaves = DEFAULT_OCTAVES if octaves is None else octaves
    if not isinstance(octaves, int) or octaves < 1:
        raise InputError(f"the frequency encoding needs a whole number of octaves >= 1, not {octaves!r}")
    width = builder.width(x)
    frequencies = builder.constant("encoding.frequencies", (2.0 ** np.arange(octaves)) * math.pi)
    column = builder.node(Op.RESHAPE, "encoding.unsqueeze", [x], shape=(None, width, 1))
    scaled = builder.node(Op.MUL, "encoding.scale", [column, frequencies])
    flat = builder.node(Op.RESHAPE, "encoding.flatten", [scaled], shape=(None, width * octaves))
    sines = builder.node(Op.SIN, "encoding.sin", [flat])
    cosines = builder.node(Op.COS, "encoding.cos", [flat])
    encoded = builder.node(Op.CONCAT, "encoding", [x, sines, cosines], axis=1)
    return encoded, width * (1 + 2 * octaves)


ENCODINGS: Mapping[str, Callable[..., tuple[str, int]]] = {"frequency": frequency}


def encode(builder: GraphBuilder, x: str, encoding: str, options: Mapping) -> tuple[str, int]:
    try:
        encoder = ENCODINGS[encoding]
    except (KeyError, TypeError):
        raise InputError(f"unknown encoding {encoding!r}; encodings: {', '.join(ENCODINGS)}") from None
    try:
        return encoder(builder, x, **options)
    except TypeError as e:
        raise InputError(f"encoding {encoding!r}: {e}") from None
