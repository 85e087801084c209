"""Operators that only rearrange the input stage's features: they move expression names and write no statement
(constants among their operands become literals)."""

from __future__ import annotations

import numpy as np

from coopnn.graph.ir import Op


def _batch_one(shape) -> tuple[int, ...]:
    """A graph shape with its batch axis (None) as 1, the size the expression arrays hold it at."""
    return tuple(1 if s is None else s for s in shape)


def _reshape(node, operands, program):
    return [program.expressions(operands[0]).reshape(_batch_one(node.attrs["shape"]))]


def _concat(node, operands, program):
    return [np.concatenate([program.expressions(o) for o in operands], axis=node.attrs["axis"])]


def _slice(node, operands, program):
    a = node.attrs
    index = [slice(None)] * operands[0].ndim
    index[a["axis"]] = slice(a["start"], a["stop"], a["step"])
    return [program.expressions(operands[0])[tuple(index)]]


def _transpose(node, operands, program):
    return [np.transpose(program.expressions(operands[0]), node.attrs["perm"])]


LOWERINGS = {Op.RESHAPE: _reshape, Op.CONCAT: _concat, Op.SLICE: _slice, Op.TRANSPOSE: _transpose}
