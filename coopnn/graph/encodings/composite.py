"""Composite (tiny-cuda-nn `Composite`, and its `NRC`/`OneBlobFrequency` preset): nested encodings over ranges of
the input columns, their outputs concatenated (the `reduction` Sum and Product are not supported).

Each nested config names its columns with `n_dims_to_encode` (and optionally `dims_to_encode_begin`; otherwise
they follow the previous one's); at most one may leave `n_dims_to_encode` out and takes the columns left (none,
where one gives `dims_to_encode_begin`, as tcnn has it). As in tcnn,
each nested output is padded to a multiple of the next one's alignment (a grid's: its features per level) with the
nested encoding's pad value (in front of a SphericalHarmonics part, after the others), so a tcnn-trained first layer
lines up. Parameters: the nested encodings' vectors one
after the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from coopnn.errors import InputError
from coopnn.graph.encodings import registry
from coopnn.graph.encodings.base import Encoding, as_rows, float32
from coopnn.graph.encodings.config import ConfigReader

NRC_PRESET = ({"n_dims_to_encode": 3, "otype": "TriangleWave"}, {"n_dims_to_encode": 5, "otype": "OneBlob"},
              {"otype": "Identity"})
MAX_DEPTH = 8  # Composites inside Composites (tcnn's configs nest one or two; a deep one would exhaust the stack)


@dataclass(frozen=True)
class Part:
    """One nested encoding: the input columns it reads, and how many pad columns follow its output."""

    encoding: Encoding
    begin: int
    pad: int


@dataclass(frozen=True)
class Composite(Encoding):
    otype = "Composite"
    aliases = ("NRC", "OneBlobFrequency")
    parts: tuple[Part, ...] = ()

    @classmethod
    def from_config(cls, config: Mapping[str, Any], n_input_dims: int, where: str) -> "Composite":
        keys = ConfigReader(config, where)
        if where.count(".nested[") >= MAX_DEPTH:  # the path `from_config` gives each nested config
            raise InputError(f"{where}: Composites nest {MAX_DEPTH} deep at most")
        if str(config.get("otype")).lower() in ("nrc", "oneblobfrequency"):
            nested = [dict(NRC_PRESET[0], n_frequencies=keys.integer("n_frequencies", 12, 1, 64)),
                      dict(NRC_PRESET[1], n_bins=keys.integer("n_bins", 4, 1, 1 << 10)), dict(NRC_PRESET[2])]
        else:
            keys.choice("reduction", "Concatenation", ("Concatenation",))
            nested = keys.raw("nested")
            if not isinstance(nested, list) or not nested:
                keys.fail("nested", f"must be a list of encoding configs, not {nested!r}")
        keys.finish()
        spans = cls._spans(nested, n_input_dims, where)
        made = [(registry.from_config(c, n, f"{where}.nested[{i}]"), begin)
                for i, (c, (begin, n)) in enumerate(zip(nested, spans)) if n > 0]
        if not made:
            raise InputError(f"{where}: key 'nested' gives every nested encoding 0 input dimensions")
        parts, width = [], 0
        for i, (encoding, begin) in enumerate(made):
            align = made[i + 1][0].output_alignment if i + 1 < len(made) else 1
            pad = -(width + encoding.n_output_dims) % align
            parts.append(Part(encoding, begin, pad))
            width += encoding.n_output_dims + pad
        return cls(n_input_dims, tuple(parts))

    @staticmethod
    def _spans(nested: list, n_input_dims: int, where: str) -> list[tuple[int, int]]:
        """(first column, column count) of each nested config, as tcnn assigns them."""
        for i, c in enumerate(nested):
            if not isinstance(c, Mapping):
                raise InputError(f"{where}.nested[{i}]: an encoding config is a JSON object (a dict), not {c!r}")
        given = [c.get("n_dims_to_encode") for c in nested]
        explicit_begin = any("dims_to_encode_begin" in c for c in nested)
        if sum(g is None for g in given) > (0 if explicit_begin else 1):
            raise InputError(f"{where}: key 'nested': at most one nested encoding may leave 'n_dims_to_encode' out, "
                             "and none where one gives 'dims_to_encode_begin' (as in tiny-cuda-nn)")
        for i, c in enumerate(nested):
            for key in ("n_dims_to_encode", "dims_to_encode_begin"):
                value = c.get(key, 0)
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise InputError(f"{where}.nested[{i}]: key {key!r} must be a whole number >= 0, not {value!r}")
        left = n_input_dims - sum(g for g in given if g is not None)
        if left < 0 and not explicit_begin:
            raise InputError(f"{where}: key 'nested' encodes {n_input_dims - left} input dimensions; the "
                             f"composite has {n_input_dims}")
        spans, offset = [], 0
        for c, g in zip(nested, given):
            if g is not None and "dims_to_encode_begin" in c:
                offset = c["dims_to_encode_begin"]
            count = g if g is not None else max(left, 0)
            if offset + count > n_input_dims:
                raise InputError(f"{where}: key 'dims_to_encode_begin' puts a nested encoding at columns "
                                 f"{offset}..{offset + count - 1} of {n_input_dims}")
            spans.append((offset, count))
            offset += count
        return spans

    @property
    def n_output_dims(self) -> int:
        return sum(p.encoding.n_output_dims + p.pad for p in self.parts)

    @property
    def n_parameters(self) -> int:
        return sum(p.encoding.n_parameters for p in self.parts)

    @property
    def output_alignment(self) -> int:
        return int(np.lcm.reduce([p.encoding.output_alignment for p in self.parts])) if self.parts else 1

    @property
    def pad_value(self) -> float:
        """The last nested encoding's: tcnn pads a composite by padding its last part."""
        return self.parts[-1].encoding.pad_value if self.parts else 1.0

    def _split(self, params: np.ndarray) -> list[np.ndarray]:
        bounds = np.cumsum([0] + [p.encoding.n_parameters for p in self.parts])
        return [params[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def initial_parameters(self, rng):
        return float32(np.concatenate([p.encoding.initial_parameters(rng) for p in self.parts] + [np.zeros(0)]))

    def forward(self, x, params):
        x = as_rows(x, self.n_input_dims)
        columns = []
        for part, own in zip(self.parts, self._split(np.asarray(params, np.float32))):
            e = part.encoding
            encoded = e.forward(x[:, part.begin:part.begin + e.n_input_dims], own)
            pad = np.full((len(x), part.pad), e.pad_value, np.float32)
            columns.extend([pad, encoded] if e.pads_in_front else [encoded, pad])
        return np.concatenate(columns, axis=1)

    def backward(self, x, params, dy, input_gradient=True):
        x = as_rows(x, self.n_input_dims)
        d_params, dx, start = [], np.zeros(x.shape, np.float32), 0
        for part, own in zip(self.parts, self._split(np.asarray(params, np.float32))):
            e = part.encoding
            first = start + (part.pad if e.pads_in_front else 0)
            g, d_x = e.backward(x[:, part.begin:part.begin + e.n_input_dims], own,
                                dy[:, first:first + e.n_output_dims], input_gradient)
            d_params.append(g)
            dx[:, part.begin:part.begin + e.n_input_dims] += d_x
            start += e.n_output_dims + part.pad
        return float32(np.concatenate(d_params + [np.zeros(0)])), dx

    def to_config(self) -> dict[str, Any]:
        nested = [{**p.encoding.to_config(), "n_dims_to_encode": p.encoding.n_input_dims,
                   "dims_to_encode_begin": p.begin} for p in self.parts]
        return {"otype": self.otype, "nested": nested}

    def describe(self) -> str:
        return f"Composite({', '.join(p.encoding.describe() for p in self.parts)})"


ENCODINGS = (Composite,)
