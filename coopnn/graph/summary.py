"""A per-node summary of a graph (op, shapes, parameters, activation) for `coopnn inspect` and reports."""

from __future__ import annotations

from dataclasses import dataclass

from coopnn.graph.ir import Graph, Op


@dataclass(frozen=True)
class LayerRow:
    name: str
    op: str
    inputs: str
    output: str
    parameters: int
    activation: str


def _shape(shape) -> str:
    return "[" + ", ".join("batch" if d is None else str(d) for d in shape) + "]"


def layer_table(graph: Graph) -> list[LayerRow]:
    rows = []
    for node in graph.nodes:
        batched = [n for n in node.inputs if not graph.is_constant(n)]
        params = sum(graph.constants[n].size for n in node.inputs if graph.is_constant(n))
        act = node.activation
        act_text = "" if act is None else act.op.value + (
            "(" + ", ".join(f"{k}={_attribute(v)}" for k, v in act.attrs.items()) + ")" if act.attrs else ""
        )
        rows.append(LayerRow(
            node.name,
            node.op.value,
            " ".join(_shape(graph.values[n].shape) for n in batched),
            _shape(graph.values[node.outputs[0]].shape),
            int(params),
            act_text,
        ))
    return rows


def flop_count(graph: Graph) -> int:
    """Floating-point operations per sample: 2 per multiply-add of every LINEAR, 1 per output element elsewhere."""
    total = 0
    for node in graph.nodes:
        out = graph.values[node.outputs[0]]
        if node.op is Op.LINEAR:
            total += 2 * graph.constants[node.inputs[1]].size * (out.feature_size // out.features[-1])
        else:
            total += out.feature_size
    return total


def _attribute(value) -> str:
    """An attribute as a table cell: text of several lines (a tensor-language function's) as its line count."""
    if isinstance(value, str) and "\n" in value.strip():
        return f"<{len(value.strip().splitlines())} lines>"
    return str(value)
