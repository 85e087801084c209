"""How the tiled training-step kernel (`coopnn.backends.coopvec.tiled_step`) runs one layer's products over its tile
of samples: a layer's 16-wide column tiles shared out over the subgroups, each loading its B tiles once and running all
the tile's row tiles on them with independent accumulators; in place, every subgroup's products read before the
barrier that precedes the epilogues' writes, and with `Tiling.split_rows` the subgroups a layer's column tiles leave
idle take a share of each column tile's row tiles instead (fewer accumulators each, all subgroups busy)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from coopnn.shaders.training.tiles.addressing import MATRIX, SHARED, TileAddressing


def row_groups(row_tiles: int, columns: int, subgroups: int) -> int:
    """Into how many groups a layer's row tiles split, so that its `columns` column tiles by the groups give
    `subgroups` units: the most that divide the row tiles and do not exceed that."""
    return max(g for g in range(1, row_tiles + 1) if row_tiles % g == 0 and g * columns <= max(subgroups, columns))


class LayerPasses(TileAddressing):
    """The layer passes of `TiledStepEmitter`, which sets, besides what `TileAddressing` reads, `tiling`, `row_tiles`,
    `least_subgroups` (the work-group's subgroups on the largest subgroup size), the matrix types `a_type` and `accumulator`, `bool`, and, as the kernel starts, `subgroup` and `subgroups`
    (SubgroupId, NumSubgroups)."""

    @contextmanager
    def column_tiles(self, width: int) -> Iterator:
        """The layer's column tiles this subgroup takes (tile c to subgroup c mod NumSubgroups); yields the first
        feature of each."""
        with self.fn.for_range(self.subgroup, self.frame.uint(width // MATRIX), self.subgroups) as tile:
            yield self.ix.mul(tile, MATRIX)

    def layer_pass(self, width: int, depth: int, source: int, b_tile_of, initial_of, epilogue) -> None:
        """One layer's products over buffer `source` (`depth` wide) into `width` output features, a column tile at a
        time: b_tile_of(column) gives the B tiles, initial_of(column) the accumulators' start, and
        epilogue(accumulator, row, column) takes each row tile's result. In place, a subgroup's products are all
        read before the barrier that precedes every epilogue."""
        if not self.tiling.in_place:
            with self.column_tiles(width) as column:
                results = self.products(source, depth, b_tile_of(column), initial_of(column))
                for r, acc in enumerate(results):
                    epilogue(acc, r * MATRIX, column)
            return
        groups = self.row_groups(width // MATRIX)
        if groups > 1:
            self.split_pass(width, depth, source, b_tile_of, initial_of, epilogue, groups)
            return
        fn = self.fn
        active = self.ix.less(self.subgroup, self.frame.uint(width // MATRIX))
        column = self.ix.mul(self.subgroup, MATRIX)
        held = [fn.variable(self.accumulator, name="product") for _ in range(self.row_tiles)]
        with fn.if_(active):
            for variable, acc in zip(held, self.products(source, depth, b_tile_of(column), initial_of(column))):
                self.ops.store(variable, acc)
        fn.barrier()
        with fn.if_(active):
            for r, variable in enumerate(held):
                epilogue(self.ops.load(self.accumulator, variable), r * MATRIX, column)

    def row_groups(self, columns: int) -> int:
        """Subgroups sharing each of a layer's `columns` column tiles in place: 1, or with `Tiling.split_rows` as many
        as the work-group's subgroups allow that divide the row tiles evenly."""
        return row_groups(self.row_tiles, columns, self.least_subgroups) if self.tiling.split_rows else 1

    def split_pass(self, width: int, depth: int, source: int, b_tile_of, initial_of, epilogue, groups: int) -> None:
        """`layer_pass` in place with `groups` subgroups a column tile: subgroup s takes column tile s mod columns
        and the (s div columns)-th run of row tiles, the same in every pass of the same width (so a layer's sign bits
        stay with the subgroup that kept them). Each group's code is its own branch, so that its rows are known
        while it is built; the accumulators are shared between the branches."""
        fn, ix, uint = self.fn, self.ix, self.frame.uint
        columns, per = width // MATRIX, self.row_tiles // groups
        group = ix.div(self.subgroup, uint(columns))
        active = ix.less(self.subgroup, uint(columns * groups))
        column = ix.mul(ix.mod(self.subgroup, uint(columns)), MATRIX)
        held = [fn.variable(self.accumulator, name="product") for _ in range(per)]
        runs = [[(g * per + j) * MATRIX for j in range(per)] for g in range(groups)]
        for g, rows in enumerate(runs):
            with fn.if_(ix.both(active, ix.equal(group, uint(g)))):
                products = self.products(source, depth, b_tile_of(column), initial_of(column), rows)
                for variable, acc in zip(held, products):
                    self.ops.store(variable, acc)
        fn.barrier()
        for g, rows in enumerate(runs):
            with fn.if_(ix.both(active, ix.equal(group, uint(g)))):
                for row, variable in zip(rows, held):
                    epilogue(self.ops.load(self.accumulator, variable), row, column)

    def products(self, source: int, depth: int, b_tile, initial, rows=None) -> list:
        """The accumulators of the tile's row tiles (or those starting at `rows`, ints or u32 ids): `initial` plus
        the sum over k of A (buffer `source`, columns k..k+16) times b_tile(k), K outermost so that the row tiles'
        chains interleave; each B tile is loaded as its step begins."""
        rows = rows if rows is not None else [r * MATRIX for r in range(self.row_tiles)]
        accumulators = [initial] * len(rows)
        for k0 in range(0, depth, MATRIX):
            b = b_tile(k0)
            for r, row in enumerate(rows):
                a = self.load(self.a_type, self.activation_tile(source, row, k0), self.row_major, self.shared_stride(),
                              SHARED)
                accumulators[r] = self.ops.matrix_mul_add(self.accumulator, a, b, accumulators[r])
        return accumulators
