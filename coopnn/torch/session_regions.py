"""Where each parameter of a training session's flat arrays (`coopnn.shaders.training.layout.ParameterLayout`, each
block padded as its step kernel pads it) sits in a `coopnn.torch` module's vector (`flat_layout.FlatLayout`, padded
to groups of 8): the byte regions vkCmdCopyBuffer moves between the two, for the weights into the session and its
gradients out of it, without the host.

Only a parameter's own elements are copied (a row at a time where the two pad a matrix's rows differently), so each
side's padding keeps what it holds: zeros in the session's buffers, and zeros in the module's gradient, which the
copy's caller fills first.
"""

from __future__ import annotations

from coopnn.torch.flat_layout import FlatLayout

# (byte offset in the module's vector, byte offset in the session's array, bytes)
Region = tuple[int, int, int]


def _block(flat_offset: int, flat_pitch: int, session_offset: int, session_pitch: int, rows: int,
           row_elements: int, itemsize: int) -> list[Region]:
    """The regions of a `rows` x `row_elements` block whose rows are `flat_pitch` and `session_pitch` elements apart
    on the two sides (one region where both are packed alike)."""
    if rows == 1 or (flat_pitch == session_pitch == row_elements):
        return [(flat_offset * itemsize, session_offset * itemsize, rows * row_elements * itemsize)]
    return [((flat_offset + r * flat_pitch) * itemsize, (session_offset + r * session_pitch) * itemsize,
             row_elements * itemsize) for r in range(rows)]


def parameter_regions(flat: FlatLayout, session_layout, plan, itemsize: int) -> list[Region]:
    """The regions of every layer's weight and bias of `plan` (a `TrainingPlan`, whose layers name the parameters
    and give their own shapes), and of every table, between `flat` and `session_layout`, for elements of `itemsize`
    bytes."""
    shapes = {layer.weight: layer for layer in session_layout.layers}
    regions: list[Region] = []
    for p in plan.layers:
        placed, weight, bias = shapes[p.weight], flat.entries[p.weight], flat.entries[p.bias]
        regions += _block(weight.offset, weight.padded[1], placed.weight_offset, placed.cols, p.rows, p.cols,
                          itemsize)
        regions += _block(bias.offset, p.rows, placed.bias_offset, p.rows, 1, p.rows, itemsize)
    for table in session_layout.tables:
        entry = flat.entries[table.name]
        regions += _block(entry.offset, table.size, table.offset, table.size, 1, table.size, itemsize)
    return regions


def trained_parameters(plan) -> set[str]:
    """The parameters the session's kernels give gradients in: its layers' weights and biases, and the tables of a
    trained encoding (a grid's)."""
    return {name for p in plan.layers for name in (p.weight, p.bias)} | {t.name for t in plan.tables}
