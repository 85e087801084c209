"""Activation fusion: an elementwise activation applied to a LINEAR result rides on the LINEAR node itself.

The LINEAR result must have the activation as its only reader and must not be a graph output (a caller keyed on that
name would otherwise get the activated values). A LINEAR carries at most one activation.
"""

from __future__ import annotations

from dataclasses import replace

from coopnn.graph import ops
from coopnn.graph.ir import Activation, Graph, Node, Op
from coopnn.graph.passes.rewrite import use_counts


def fuse_activation(graph: Graph) -> Graph:
    """The graph with each fusable activation that alone reads a LINEAR result folded into that LINEAR node."""
    uses = use_counts(graph)
    nodes: list[Node] = []
    position: dict[str, int] = {}  # LINEAR output -> its index in `nodes`
    for node in graph.nodes:
        index = position.get(node.inputs[0]) if _is_activation(node) else None
        linear = nodes[index] if index is not None else None
        if linear is None or linear.activation is not None or uses[linear.outputs[0]] != 1:
            if node.op is Op.LINEAR:
                position[node.outputs[0]] = len(nodes)
            nodes.append(node)
            continue
        activation = Activation(node.op, node.attrs)
        nodes[index] = replace(linear, outputs=node.outputs, attrs={**linear.attrs, "activation": activation})
    return graph.with_nodes(nodes)


def _is_activation(node: Node) -> bool:
    # a fused LINEAR produces f32, so an activation producing anything else (a Cast to bool) cannot ride on it
    return ops.opdef(node.op).fusable_activation and ops.output_dtype(node.op, node.attrs) == "f32"
