"""The geometry of tiny-cuda-nn's multiresolution grids, level by level: scale, resolution, table size and offset,
and the index of a grid vertex in its level's table (dense, tiled or CoherentPrime-hashed), in tcnn's uint32 and
float32 arithmetic so that a tcnn-trained table is read at the same entries.

Per level l: scale = 2^(l log2(per_level_scale)) base_resolution - 1 (float32; the -1 makes base_resolution count
vertices, not cells), resolution = ceil(scale) + 1 vertices a side. Its table holds resolution^d entries rounded up
to a multiple of 8, capped at 2^log2_hashmap_size for a hash grid and at base_resolution^d for a tiled one. A
vertex is indexed densely (x + y r + z r^2 ..., in uint32) unless the grid is a hash grid whose table is smaller
than r^d (or r is too large to index densely), when it is hashed; either way the index is taken modulo the table size
(so a tiled grid repeats, and a dense one wraps the vertices past its last one). The dense index adds a dimension only
while its stride r^k is within the table, as tcnn's loop does (`dense_strides`): a tiled level much finer than its
table leaves out its last dimensions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# tiny-cuda-nn's CoherentPrime factors: the first dimension is not scrambled, so neighbours along x stay adjacent
COHERENT_PRIMES = (1, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737)
# the largest resolution per dimension count whose r^d fits in uint32 (tcnn's MAX_BASES)
MAX_DENSE_BASE = {1: 0xFFFFFFFF, 2: 0xFFFF, 3: 0x659, 4: 0xFF}
MAX_DENSE_PARAMS = 0xFFFFFFFF // 2  # tcnn's cap on a level's dense size
U32 = 0xFFFFFFFF


def level_scale(level: int, per_level_scale: float, base_resolution: int) -> np.float32:
    """The level's scale, in float32 as tcnn computes it."""
    log2_scale = np.log2(np.float32(per_level_scale))
    with np.errstate(over="ignore"):  # an infinite scale is refused by the grid's size check
        return np.float32(np.exp2(np.float32(level) * log2_scale) * np.float32(base_resolution) - np.float32(1))


UNBOUNDED = 1 << 62  # the resolution recorded for a level whose scale overflowed float32 (the grid refuses it)


def level_resolution(scale: np.float32) -> int:
    return int(math.ceil(float(scale))) + 1 if math.isfinite(float(scale)) else UNBOUNDED


def next_multiple(value: int, step: int) -> int:
    return (value + step - 1) // step * step


@dataclass(frozen=True)
class Level:
    scale: np.float32
    resolution: int
    size: int  # entries in its table
    offset: int  # entries of the levels before it
    hashed: bool  # whether some vertex is looked up through the hash


def levels(n_dims: int, n_levels: int, grid_type: str, log2_hashmap_size: int, base_resolution: int,
           per_level_scale: float) -> tuple[Level, ...]:
    out, offset = [], 0
    for level in range(n_levels):
        scale = level_scale(level, per_level_scale, base_resolution)
        resolution = level_resolution(scale)
        dense = MAX_DENSE_PARAMS if float(np.float32(resolution)) ** n_dims > MAX_DENSE_PARAMS else resolution ** n_dims
        size = next_multiple(dense, 8)
        if grid_type == "Tiled":
            size = min(size, base_resolution ** n_dims)
        elif grid_type == "Hash":
            size = min(size, 1 << log2_hashmap_size)
        stride = resolution ** n_dims if resolution <= MAX_DENSE_BASE[n_dims] else U32
        out.append(Level(scale, resolution, size, offset, grid_type == "Hash" and size < stride))
        offset += size
    return tuple(out)


def dense_strides(level: Level, n_dims: int) -> tuple[int, ...]:
    """The strides r^k of the leading dimensions tcnn's dense index adds: dimension k only while r^k is within the
    level's table (tcnn's guard against uint32 overflow in fine levels), so every stride fits uint32."""
    strides, stride = [], 1
    while len(strides) < n_dims and stride <= level.size:
        strides.append(stride)
        stride *= level.resolution
    return tuple(strides)


def vertex_index(level: Level, n_dims: int, corner: np.ndarray) -> np.ndarray:
    """Table entries (int64, in [0, level.size)) of the vertices `corner` [..., n_dims] (uint32)."""
    corner = corner.astype(np.uint32)
    if level.hashed:
        index = np.zeros(corner.shape[:-1], np.uint32)
        for dim in range(n_dims):
            index ^= corner[..., dim] * np.uint32(COHERENT_PRIMES[dim])
    else:
        index = np.zeros(corner.shape[:-1], np.uint32)
        if level.resolution <= MAX_DENSE_BASE[n_dims]:
            for dim, stride in enumerate(dense_strides(level, n_dims)):
                index += corner[..., dim] * np.uint32(stride)
    return (index % np.uint32(level.size)).astype(np.int64)
