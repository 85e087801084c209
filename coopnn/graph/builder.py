"""`GraphBuilder`: graph IR built in code, one node or constant at a time (what `coopnn.mlp`, its input encodings and
the tests build graphs with, where there is no ONNX file to import)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from coopnn.graph import ops
from coopnn.graph.ir import Graph, Node, Op, Value
from coopnn.graph.verify import verify


class GraphBuilder:
    """Adds nodes and constants one at a time; every node's output shape comes from the operator table."""

    def __init__(self, name: str):
        self.name = name
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self.values: dict[str, Value] = {}
        self.constants: dict[str, np.ndarray] = {}

    def input(self, name: str, width: int) -> str:
        self.values[name] = Value(name, "f32", (None, width))
        self.inputs.append(self.values[name])
        return name

    def constant(self, name: str, array: Any) -> str:
        self.constants[name] = np.asarray(array, np.float32)
        self.values[name] = Value(name, "f32", self.constants[name].shape)
        return name

    def width(self, name: str) -> int:
        return self.values[name].shape[-1]

    def node(self, op: Op, name: str, inputs: Sequence[str], output: str | None = None, **attrs: Any) -> str:
        """Add node `name`; its result is the value `output` (default: the node's name)."""
        output = name if output is None else output
        shape = ops.output_shape(op, [self.values[i].shape for i in inputs], attrs)
        self.nodes.append(Node(op, name, tuple(inputs), (output,), attrs))
        self.values[output] = Value(output, ops.output_dtype(op, attrs), shape)
        return output

    def graph(self, outputs: Sequence[str]) -> Graph:
        return verify(Graph(self.name, tuple(self.inputs), tuple(self.values[o] for o in outputs), tuple(self.nodes),
                            self.values, self.constants))
