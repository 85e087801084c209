"""Where each parameter of a model sits in a `coopnn.torch` module's one flat parameter vector.

Parameters follow the model's order (`coopnn.graph.parameters`: each Linear's weight, row-major [out, in], then its
bias, then an encoding's parameters). Each block is padded with zeros to whole groups of `GROUP` elements in every
dimension and starts at a multiple of `ALIGNMENT` elements: the float16 copy of a padded matrix is then a row-major
matrix whose rows are 16-byte multiples at a 64-byte aligned address, as cooperative-vector conversions read them.
Padding stays zero under any optimizer, since its gradient is zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

GROUP = 8
ALIGNMENT = 32


def _padded(n: int) -> int:
    return -(-n // GROUP) * GROUP


@dataclass(frozen=True)
class FlatEntry:
    name: str
    offset: int  # in elements
    shape: tuple[int, ...]  # the parameter's own
    padded: tuple[int, ...]  # as stored

    @property
    def size(self) -> int:
        return math.prod(self.padded)


@dataclass(frozen=True)
class FlatLayout:
    entries: Mapping[str, FlatEntry]
    size: int  # elements

    @classmethod
    def of(cls, shapes: Mapping[str, tuple[int, ...]]) -> FlatLayout:
        entries, offset = {}, 0
        for name, shape in shapes.items():
            padded = tuple(_padded(n) for n in shape)
            entries[name] = FlatEntry(name, offset, tuple(shape), padded)
            offset = -(-(offset + math.prod(padded)) // ALIGNMENT) * ALIGNMENT
        return cls(entries, max(offset, ALIGNMENT))

    def flatten(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """The parameters `values` (by name, every one of the layout) as one float32 vector."""
        flat = np.zeros(self.size, np.float32)
        for name, entry in self.entries.items():
            block = flat[entry.offset:entry.offset + entry.size].reshape(entry.padded)
            block[tuple(slice(0, n) for n in entry.shape)] = np.asarray(values[name], np.float32)
        return flat

    def views(self, flat):
        """Each parameter as a view of `flat` (a numpy array or torch tensor of the layout), padding cut off."""
        return {name: flat[entry.offset:entry.offset + entry.size].reshape(entry.padded)[
                    tuple(slice(0, n) for n in entry.shape)] for name, entry in self.entries.items()}
