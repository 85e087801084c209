"""The ONNX form of Grid: per level, the scaled position's floor and fraction, the cell's corners in int64 (uint32
wrap-around by Mod 2^32), their table entries (CoherentPrime hash by BitwiseXor of 32-bit products, or the dense
index), a Gather from the parameter initializer seen as [entries, features], and the d-linear blend."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from coopnn.graph.encodings import grid_levels
from coopnn.graph.encodings.grid import Grid
from coopnn.graph.onnx.encodings.emit import U32_RANGE, Emitter


def _entries(e: Emitter, encoding: Grid, level: grid_levels.Level, corners: str) -> str:
    """Table entries (int64 [batch, corners], with the level's offset) of `corners` [batch, corners, d]."""
    d = encoding.n_input_dims
    index = None
    if level.hashed:
        for dim in range(d):
            term = e.times_u32(e.column(corners, dim, 2), grid_levels.COHERENT_PRIMES[dim])
            index = term if index is None else e.op("BitwiseXor", [index, term])
    elif level.resolution <= grid_levels.MAX_DENSE_BASE[d]:
        for dim, stride in enumerate(grid_levels.dense_strides(level, d)):
            term = e.times_u32(e.column(corners, dim, 2), stride)
            index = term if index is None else e.op("Mod", [e.op("Add", [index, term]), e.i64(U32_RANGE)])
    else:  # tcnn indexes every vertex of a level too fine to index densely at entry 0
        index = e.op("Mul", [e.column(corners, 0, 2), e.i64(0)])
    return e.op("Add", [e.op("Mod", [index, e.i64(level.size)]), e.i64(level.offset)])


def _level(e: Emitter, encoding: Grid, level: grid_levels.Level, x: str, table: str) -> str:
    d, f = encoding.n_input_dims, encoding.n_features_per_level
    position = e.op("Add", [e.op("Mul", [x, e.f32(level.scale, "scale")]), e.f32(0.5)])
    floor = e.op("Floor", [position])
    fraction = e.op("Sub", [position, floor])
    cell = e.op("Mod", [e.op("Cast", [floor], to=TensorProto.INT64), e.i64(U32_RANGE)])
    if encoding.interpolation == "Nearest":
        values = e.op("Gather", [table, _entries(e, encoding, level, e.unsqueeze(cell, 1))], axis=0)
        return e.reshape(values, [0, f])
    bits = (np.arange(1 << d)[:, None] >> np.arange(d)) & 1  # [corners, d]
    corners = e.op("Mod", [e.op("Add", [e.unsqueeze(cell, 1), e.i64(bits, "bits")]), e.i64(U32_RANGE)])
    values = e.op("Gather", [table, _entries(e, encoding, level, corners)], axis=0)  # [batch, corners, F]
    t = fraction
    if encoding.interpolation == "Smoothstep":
        t = e.op("Mul", [e.op("Mul", [t, t]), e.op("Sub", [e.f32(3.0), e.op("Mul", [t, e.f32(2.0)])])])
    t = e.unsqueeze(t, 1)  # [batch, 1, d]
    chosen = e.op("Add", [e.op("Mul", [t, e.f32(bits, "bits")]),
                          e.op("Mul", [e.op("Sub", [e.f32(1.0), t]), e.f32(1 - bits, "other_bits")])])
    weights = e.op("ReduceProd", [chosen, e.i64([2], "axes")], keepdims=1)  # [batch, corners, 1]
    return e.op("ReduceSum", [e.op("Mul", [weights, values]), e.i64([1], "axes")], keepdims=0)


def grid(e: Emitter, encoding: Grid, x: str, params: str | None, output: str) -> None:
    table = e.reshape(params, [-1, encoding.n_features_per_level])
    levels = [_level(e, encoding, level, x, table) for level in encoding.levels]
    e.last("Concat", levels, output, axis=1)


WRITERS = {Grid.otype: grid}
