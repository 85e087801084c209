"""Input encodings built as graph IR: what `coopnn.mlp(encoding=...)` puts before the first layer.

`encoding="frequency"` builds coopnn's NeRF-style frequency encoding from elementwise operators, as it always has
(every backend runs it). A tiny-cuda-nn encoding config (a dict with an `otype`, or an otype name as a string)
becomes one `Op.ENCODING` node holding the `coopnn.graph.encodings` object, with its parameters (a grid's tables)
as the constant `encoding.params`, drawn from the model's seeded generator; `docs/encodings.md` lists them.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from coopnn.errors import InputError
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.encodings.base import Encoding
from coopnn.graph.encodings.frequency import MAX_FREQUENCIES
from coopnn.graph.encodings.registry import from_config
from coopnn.graph.ir import Op

DEFAULT_OCTAVES = 6


def frequency(builder: GraphBuilder, x: str, octaves: int | None = None) -> tuple[str, int]:
    """NeRF's positional encoding [x, sin(x 2^k pi), cos(x 2^k pi)] for k < octaves, in the form the zoo exports
    (x as [batch, d, 1] times the frequencies, flattened back to [batch, d * octaves])."""
    octaves = DEFAULT_OCTAVES if octaves is None else octaves
    if isinstance(octaves, bool) or not isinstance(octaves, int) or not 1 <= octaves <= MAX_FREQUENCIES:
        raise InputError(f"the frequency encoding needs a whole number of octaves from 1 to {MAX_FREQUENCIES} "
                         f"(past that 2^k pi leaves float32's range), not {octaves!r}")
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


def encoding_node(builder: GraphBuilder, x: str, encoding: Encoding, rng: np.random.Generator,
                  name: str = "encoding") -> tuple[str, int]:
    """Add `encoding` over the value `x` as an ENCODING node `name`, its parameters started as the encoding starts
    them."""
    inputs = [x]
    if encoding.n_parameters:
        inputs.append(builder.constant(f"{name}.params", encoding.initial_parameters(rng)))
    return builder.node(Op.ENCODING, name, inputs, encoding=encoding), encoding.n_output_dims


def encode(builder: GraphBuilder, x: str, encoding: str | Mapping[str, Any], options: Mapping,
           rng: np.random.Generator | None = None) -> tuple[str, int]:
    """Encode `x` by `encoding`: a name of `ENCODINGS` (with its `options`), or a tiny-cuda-nn config or otype."""
    if isinstance(encoding, str) and encoding in ENCODINGS:
        try:
            return ENCODINGS[encoding](builder, x, **options)
        except TypeError as e:
            raise InputError(f"encoding {encoding!r}: {e}") from None
    if isinstance(encoding, str):
        encoding = {"otype": encoding}
    if not isinstance(encoding, Mapping):
        raise InputError(f"encoding must be a name ({', '.join(ENCODINGS)} or a tiny-cuda-nn otype) or a "
                         f"tiny-cuda-nn encoding config (a dict), not {encoding!r}")
    if options:
        raise InputError(f"octaves configures encoding='frequency'; a tiny-cuda-nn config takes its own keys "
                         f"(Frequency: n_frequencies), not {sorted(options)}")
    made = from_config(encoding, builder.width(x))
    return encoding_node(builder, x, made, np.random.default_rng(0) if rng is None else rng)
