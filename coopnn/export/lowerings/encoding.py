"""`Op.ENCODING` nodes: the encoding they hold, lowered by its module in `coopnn.export.encodings`."""

from __future__ import annotations

import numpy as np

from coopnn.export.encodings import lower_encoding
from coopnn.graph.ir import Op


def _encoding(node, operands, program):
    encoding = node.attrs["encoding"]
    params = np.asarray(operands[1]).ravel() if len(operands) > 1 else np.zeros(0, np.float32)
    columns = list(program.expressions(operands[0])[0])
    outputs = lower_encoding(encoding, columns, params, program, f"node {node.name!r}")
    return [np.array([outputs], dtype=object)]


LOWERINGS = {Op.ENCODING: _encoding}
