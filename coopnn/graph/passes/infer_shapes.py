"""Shape inference: every value record recomputed from the graph inputs and constants with the operator table.

The batch axis (None) starts at the graph inputs and flows through the shape rules; values computed from constants
alone stay unbatched. Run after passes that rewrite nodes, or after giving a graph new input shapes.
"""

from __future__ import annotations

import numpy as np

from coopnn.errors import ModelFormatError
from coopnn.graph import ops
from coopnn.graph.ir import Graph, Value


def infer_shapes(graph: Graph) -> Graph:
    """The graph with fresh Value records for every input, constant and node output; raises ModelFormatError
    naming the node when its input shapes do not combine."""
    values = {v.name: v for v in graph.inputs}
    for name, array in graph.constants.items():
        values[name] = Value(name, "bool" if array.dtype == np.bool_ else "f32", tuple(array.shape))
    for node in graph.nodes:
        undefined = [name for name in node.inputs if name not in values]
        if undefined:
            raise ModelFormatError(
                f"node {node.name!r} ({node.op.value}) reads {undefined[0]!r}, "
                "which no graph input, constant or earlier node defines"
            )
        shapes = [values[name].shape for name in node.inputs]
        try:
            shape = ops.output_shape(node.op, shapes, node.attrs)
        except ops.ShapeError as e:
            described = ", ".join(f"{name!r} {_shape_text(values[name].shape)}" for name in node.inputs)
            raise ModelFormatError(
                f"node {node.name!r} ({node.op.value}) cannot combine its inputs {described}: {e}"
            ) from e
        dtype = ops.output_dtype(node.op, node.attrs)
        values.update((out, Value(out, dtype, shape)) for out in node.outputs)
    missing = [v.name for v in graph.outputs if v.name not in values]
    if missing:
        raise ModelFormatError(f"graph output {missing[0]!r} is produced by no node, input or constant")
    return graph.replace(values=values, outputs=tuple(values[v.name] for v in graph.outputs))


def _shape_text(shape: tuple) -> str:
    return "[" + ", ".join("batch" if d is None else str(d) for d in shape) + "]"
