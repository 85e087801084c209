"""Dead-code removal: pass-through nodes are bypassed, then nodes and constants that no output depends on dropped.

A pass-through node (Identity, a one-input Concat, a Reshape to the same shape, a Transpose by the identity
permutation, a Cast to the type it already has) is removed by letting its readers read its input. Graph output names
are kept exactly, since callers key results by them: when a pass-through produces an output, the node computing its
input is renamed to produce that output instead, and where that is impossible (the input is a graph input, a constant
or another output) the pass-through stays.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from coopnn.graph.ir import Graph, Node, Op

_PASS_THROUGH: dict[Op, Callable[[Node, Graph], bool]] = {
    Op.IDENTITY: lambda node, graph: True,
    Op.CONCAT: lambda node, graph: len(node.inputs) == 1,
    Op.RESHAPE: lambda node, graph: tuple(node.attrs["shape"]) == tuple(graph.values[node.inputs[0]].shape),
    Op.TRANSPOSE: lambda node, graph: tuple(node.attrs["perm"]) == tuple(range(len(node.attrs["perm"]))),
    Op.CAST: lambda node, graph: node.attrs["to"] == graph.values[node.inputs[0]].dtype,
}


def remove_dead_code(graph: Graph) -> Graph:
    """The graph without pass-through nodes, without nodes no output depends on, and without unread constants."""
    return _drop_unused(_bypass_pass_through(graph))


def _is_pass_through(node: Node, graph: Graph) -> bool:
    check = _PASS_THROUGH.get(node.op)
    return check is not None and check(node, graph)


def _bypass_pass_through(graph: Graph) -> Graph:
    outputs = {v.name for v in graph.outputs}
    producers = graph.producers()
    renamed: dict[str, str] = {}

    def resolve(name: str) -> str:
        while name in renamed:
            name = renamed[name]
        return name

    kept = []
    for node in graph.nodes:
        if not _is_pass_through(node, graph):
            kept.append(node)
            continue
        source, result = resolve(node.inputs[0]), node.outputs[0]
        if result not in outputs:
            renamed[result] = source
        elif source in producers and source not in outputs:
            # `source` is computed by a kept node, which now writes its result under the output name directly
            renamed[source] = result
        else:
            kept.append(node)
    nodes = [
        replace(node, inputs=tuple(map(resolve, node.inputs)), outputs=tuple(map(resolve, node.outputs)))
        for node in kept
    ]
    return graph.with_nodes(nodes)


def _drop_unused(graph: Graph) -> Graph:
    live = {v.name for v in graph.outputs}
    kept = []
    for node in reversed(graph.nodes):
        if live.intersection(node.outputs):
            kept.append(node)
            live.update(node.inputs)
    return graph.with_nodes(reversed(kept))
