"""The coopmat target's weight buffer: every load a plain OpCooperativeMatrixLoadKHR inside its entry, and an input
encoding's parameter vector (read element by element by the per-sample input stage).

Each product's matrix is stored zero-padded to whole tiles (padded rows x padded columns, row-major), so the B tiles
past the layer's rows or columns read zeros; each bias as a tile of `rows` identical rows (padded with zeros), the
accumulator a product starts from, loaded with a row stride like any tile.
"""

from __future__ import annotations

import numpy as np

from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import WeightImage, align_up, pack
from coopnn.shaders.targets.tile_plan import TilePlan


def padded_matrix(matrix: np.ndarray, rows: int, columns: int) -> np.ndarray:
    out = np.zeros((rows, columns), np.float32)
    out[:matrix.shape[0], :matrix.shape[1]] = matrix
    return out


def pack_tiles(plan: TilePlan, weights: WeightFormat, granularity: int, bias_rows: int) -> WeightImage:
    """The plan's matrices padded to whole `granularity` and its biases as `bias_rows` x padded-width tiles, in the
    `weights` format, each under its kernel parameter's name."""
    constants = plan.program.constants
    arrays: dict[str, np.ndarray] = {}
    for stage in plan.products:
        width, columns = align_up(stage.width, granularity), align_up(stage.columns, granularity)
        arrays[stage.matrix] = padded_matrix(constants[stage.matrix], width, columns)
        if stage.bias is not None:
            row = padded_matrix(constants[stage.bias].reshape(1, -1), 1, width)
            arrays[stage.bias] = np.repeat(row, bias_rows, axis=0)
    roles = {name: "matrix" for name in arrays}
    for instr in plan.input_stage:  # an encoding's parameter vector, read element by element
        if instr.op == "encode" and len(instr.args) > 1:
            arrays[instr.args[1]], roles[instr.args[1]] = constants[instr.args[1]], "vector"
    return pack(arrays, roles, weights)
