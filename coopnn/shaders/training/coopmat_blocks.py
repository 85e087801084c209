"""How the cooperative-matrix weight gradients (`coopnn.shaders.training.coopmat_gradients`) cut the work: every
layer's gradient into subgroup blocks of 16 x 16 tiles (`layer_blocks`, `LayerBlocks`), the batch into chunks of
16-sample tiles (`chunking`), and how many partial gradients a capacity needs (`most_chunks`), each as a `Tuning` may
set it."""

from __future__ import annotations

from dataclasses import dataclass

from coopnn.shaders.training.layout import ParameterLayout
from coopnn.shaders.training.tuning import DEFAULT, Tuning

TILE = 16
# 128 tiles a chunk, the fastest chunk (bench/results/nvidia-h100-80gb-hbm3-2026-11-25-coopmat-gradient-sweep.md).
# Blocks of 2 x 4 tiles, or 4 x 4 in layers of 128 rows or more, the fastest blocks on 64-row and on 128-row layers
# (bench/results/nvidia-h100-80gb-hbm3-2026-11-27-coopmat-gradient-blocks.md).
MAX_CHUNK_TILES = 128
MIN_CHUNK_TILES = 16
# Chunks are halved while a batch's chunks give fewer subgroups than this: subgroups waiting on their loads need
# others to hide them, and halving from more made steps slower
# (bench/results/nvidia-h100-80gb-hbm3-2026-11-27-coopmat-gradient-chunks.md).
TARGET_SUBGROUPS = 768
SUBGROUP = 32
MAX_COLUMN_TILES = 4
ROW_TILES = 2
WIDE_ROW_TILES = 4
WIDE_LAYER_ROWS = 128


@dataclass(frozen=True)
class LayerBlocks:
    """How a layer's gradient is cut into subgroup blocks: `row_tiles` x `column_tiles` tiles each,
    `row_blocks` x `column_blocks` of them, numbered row block fastest from task `first`."""

    index: int
    first: int
    row_tiles: int
    column_tiles: int
    row_blocks: int
    column_blocks: int

    @property
    def count(self) -> int:
        return self.row_blocks * self.column_blocks


def row_tiles_of(layer_rows: int) -> int:
    """Row tiles of a block of a layer of `layer_rows` rows (before `layer_blocks` caps them at the layer's)."""
    return WIDE_ROW_TILES if layer_rows >= WIDE_LAYER_ROWS else ROW_TILES


def layer_blocks(parameters: ParameterLayout, row_tiles: int | None = None,
                 column_tiles: int = MAX_COLUMN_TILES) -> list[LayerBlocks]:
    """Every layer's blocks, in dispatch order, each at most `row_tiles` (by default `row_tiles_of` the layer) x
    `column_tiles` tiles (fewer where the layer has fewer)."""
    out, first = [], 0
    for index, layer in enumerate(parameters.layers):
        rows, cols = -(-layer.rows // TILE), -(-layer.cols // TILE)
        r = min(row_tiles_of(layer.rows) if row_tiles is None else row_tiles, rows)
        c = min(column_tiles, cols)
        out.append(LayerBlocks(index, first, r, c, -(-rows // r), -(-cols // c)))
        first += out[-1].count
    return out


def tuned_blocks(parameters: ParameterLayout, tuning: Tuning = DEFAULT) -> list[LayerBlocks]:
    """`layer_blocks` of the block size `tuning` sets."""
    return layer_blocks(parameters, tuning.row_tiles, tuning.column_tiles or MAX_COLUMN_TILES)


def task_count(parameters: ParameterLayout, tuning: Tuning = DEFAULT) -> int:
    """Work-groups of one chunk (each one block, of `tuning.gradient_subgroups` subgroups)."""
    return sum(blocks.count for blocks in tuned_blocks(parameters, tuning))


def chunking(parameters: ParameterLayout, count: int, tuning: Tuning = DEFAULT) -> tuple[int, int]:
    """(tiles of 16 samples a chunk, chunks) of a batch of `count` samples: `tuning.chunk_tiles` where set, else the
    most tiles (up to `MAX_CHUNK_TILES`) whose chunks give `TARGET_SUBGROUPS` subgroups (or the tuning's), or
    `MIN_CHUNK_TILES`."""
    if tuning.chunk_tiles:
        return tuning.chunk_tiles, -(-count // (tuning.chunk_tiles * TILE))
    tasks, tiles = task_count(parameters, tuning) * tuning.gradient_subgroups, MAX_CHUNK_TILES
    target = tuning.target_subgroups or TARGET_SUBGROUPS
    while tiles > MIN_CHUNK_TILES and -(-count // (tiles * TILE)) * tasks < target:
        tiles //= 2
    return tiles, -(-count // (tiles * TILE))


def most_chunks(parameters: ParameterLayout, capacity: int, tuning: Tuning = DEFAULT) -> int:
    """At least the chunks (`chunking`) of any batch up to `capacity` samples: a chunk has `MAX_CHUNK_TILES` tiles,
    or is halved only while the chunks give fewer than the target's subgroups, so less than twice that many once
    halved."""
    if tuning.chunk_tiles:
        return -(-capacity // (tuning.chunk_tiles * TILE))
    target = tuning.target_subgroups or TARGET_SUBGROUPS
    halved = 2 * -(-target // (task_count(parameters, tuning) * tuning.gradient_subgroups)) + 1
    return min(-(-capacity // (MIN_CHUNK_TILES * TILE)), max(-(-capacity // (MAX_CHUNK_TILES * TILE)), halved))
