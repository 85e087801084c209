"""Where a training step keeps its numbers: the flat parameter order and the tape of activations and deltas.

Parameters (fp32 master weights, their gradients, the optimizer's slots and the working copy the kernels read) are
flat arrays in one order: for every layer its weight (rows x cols, row-major) and then its bias (rows); after the
layers, the tables of a trained input encoding (a grid's parameter vector, `TableShape`), whose gradient the step
kernel accumulates itself (so the weight-gradient kernels cover only the first `layers_size` elements).

The tape holds, for every layer, what its weight gradient needs from every sample of the batch: the layer's input
(`cols` features, sample-major: element [b, k] at b * cols + k) and the gradient of the loss with respect to its
output before the activation, the delta (`rows` features), in the layout the weight-gradient kernels read
(`TapeLayout.deltas`): feature-major (element [m, b] at m * capacity + b), where one delta row of many samples is one
contiguous vector, or sample-major like the inputs (element [b, m] at b * rows + m), which the cooperative-vector
step kernel stores as whole vectors. Regions follow each other in layer order, input first; a region of `width`
features spans width * capacity elements, so a region starts at (sum of the widths before it) * capacity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import Entry


@dataclass(frozen=True)
class LayerShape:
    weight: str  # parameter names
    bias: str
    rows: int  # outputs (M)
    cols: int  # inputs (K)
    weight_offset: int  # in elements of the flat parameter arrays
    bias_offset: int

    @property
    def weight_size(self) -> int:
        return self.rows * self.cols


@dataclass(frozen=True)
class TableShape:
    name: str  # the parameter name of an encoding's parameter vector
    size: int  # elements
    offset: int  # in elements of the flat parameter arrays


@dataclass(frozen=True)
class ParameterLayout:
    layers: tuple[LayerShape, ...]
    size: int  # elements of every flat parameter array
    tables: tuple[TableShape, ...] = ()

    @classmethod
    def of(cls, layers: Sequence[tuple[str, str, int, int]],
           tables: Sequence[tuple[str, int]] = ()) -> ParameterLayout:
        """From (weight name, bias name, rows, cols) per layer, in order, and (name, elements) per encoding table."""
        shapes, offset = [], 0
        for weight, bias, rows, cols in layers:
            shapes.append(LayerShape(weight, bias, rows, cols, offset, offset + rows * cols))
            offset += rows * cols + rows
        placed = []
        for name, size in tables:
            placed.append(TableShape(name, size, offset))
            offset += size
        return cls(tuple(shapes), offset, tuple(placed))

    @property
    def layers_size(self) -> int:
        """Elements of the layers' weights and biases: those the weight-gradient kernels reduce."""
        return self.tables[0].offset if self.tables else self.size

    def entries(self, fmt: WeightFormat, tables: bool = True) -> dict[str, Entry]:
        """The parameters as manifest entries of a flat buffer of elements of format `fmt`: weights row-major,
        biases and (unless `tables` is False) tables vectors."""
        itemsize = fmt.storage.itemsize
        out = {}
        for layer in self.layers:
            out[layer.weight] = Entry(layer.weight, layer.weight_offset * itemsize, layer.weight_size * itemsize,
                                      (layer.rows, layer.cols), "row_major", fmt.name, layer.cols * itemsize)
            out[layer.bias] = Entry(layer.bias, layer.bias_offset * itemsize, layer.rows * itemsize, (layer.rows,),
                                    "vector", fmt.name)
        for table in self.tables if tables else ():
            out[table.name] = Entry(table.name, table.offset * itemsize, table.size * itemsize, (table.size,),
                                    "vector", fmt.name)
        return out

    def block_index(self, block: int) -> np.ndarray:
        """Where each parameter goes in a blocked copy of the flat array (uint32, one per element): every weight
        matrix as `block` x `block` tiles of contiguous elements, tiles in row-major order and each tile row-major,
        so that a tile is one contiguous read; biases where they are. Every width must be a multiple of `block`."""
        index = np.arange(self.size, dtype=np.uint32)
        for layer in self.layers:
            if layer.rows % block or layer.cols % block:
                raise ValueError(f"a blocked copy takes widths that are multiples of {block}, not {layer.rows} x "
                                 f"{layer.cols}")
            r, c = np.divmod(np.arange(layer.weight_size), layer.cols)
            tile = (r // block) * (layer.cols // block) + c // block
            index[layer.weight_offset:layer.bias_offset] = (layer.weight_offset + tile * block * block
                                                            + (r % block) * block + c % block)
        return index

    def slices(self) -> dict[str, tuple[slice, tuple[int, ...]]]:
        """Parameter name -> (its slice of a flat array, its shape)."""
        out = {}
        for layer in self.layers:
            out[layer.weight] = (slice(layer.weight_offset, layer.bias_offset), (layer.rows, layer.cols))
            out[layer.bias] = (slice(layer.bias_offset, layer.bias_offset + layer.rows), (layer.rows,))
        for table in self.tables:
            out[table.name] = (slice(table.offset, table.offset + table.size), (table.size,))
        return out


DELTA_LAYOUTS = ("features", "samples")


@dataclass(frozen=True)
class TapeLayout:
    layers: tuple[LayerShape, ...]
    deltas: str = "features"  # the deltas' layout: "features" (feature-major) or "samples" (sample-major)

    def __post_init__(self):
        if self.deltas not in DELTA_LAYOUTS:
            raise ValueError(f"deltas must be one of {', '.join(DELTA_LAYOUTS)}, not {self.deltas!r}")

    def require_deltas(self, layout: str, reader: str) -> None:
        """A ValueError unless the deltas are kept in `layout`, the one `reader` (a kernel) reads."""
        if self.deltas != layout:
            raise ValueError(f"{reader} read deltas laid out by {layout}, not by {self.deltas}")

    @property
    def width(self) -> int:
        """Features stored per sample over all regions."""
        return sum(layer.cols + layer.rows for layer in self.layers)

    def input_start(self, layer: int) -> int:
        """Where layer `layer`'s input region starts, in units of capacity elements."""
        return sum(l.cols + l.rows for l in self.layers[:layer])

    def delta_start(self, layer: int) -> int:
        """Where layer `layer`'s delta region starts, in units of capacity elements."""
        return self.input_start(layer) + self.layers[layer].cols
