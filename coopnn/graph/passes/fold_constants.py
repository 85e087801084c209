"""Constant folding: nodes that read only constants become constants, and chains of scalar scalings become one Mul.

Weight transposes, reshapes (ONNX Unsqueeze and Flatten arrive as RESHAPE) and any other all-constant subgraph are
evaluated once here with the operator table's numpy semantics, so later passes see plain constant weights.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from coopnn.graph import ops
from coopnn.graph.ir import Graph, Node, Op
from coopnn.graph.passes.rewrite import NameScope, use_counts


def fold_constants(graph: Graph) -> Graph:
    """The graph with every all-constant node evaluated and every Mul/Div-by-scalar chain merged into one Mul."""
    constants = dict(graph.constants)
    uses = use_counts(graph)
    names = NameScope(graph)
    kept: dict[str, Node] = {}  # by output name, in graph order
    for node in graph.nodes:
        out = node.outputs[0]
        if all(name in constants for name in node.inputs):
            constants[out] = _evaluate(node, constants)
            continue
        merged = _merge_scalings(node, kept, constants, uses)
        if merged is None:
            kept[out] = node
            continue
        inner, x, factor = merged
        scale = names.fresh(f"{node.name}_scale")
        constants[scale] = factor
        del kept[inner.outputs[0]]
        kept[out] = Node(Op.MUL, node.name, (x, scale), node.outputs)
    return graph.with_nodes(kept.values(), constants)


def _evaluate(node: Node, constants: dict[str, np.ndarray]) -> np.ndarray:
    result = ops.evaluate(node.op, [constants[name] for name in node.inputs], node.attrs)
    dtype = np.bool_ if ops.output_dtype(node.op, node.attrs) == "bool" else np.float32
    return np.asarray(result, dtype=dtype)


def _merge_scalings(
    node: Node, kept: dict[str, Node], constants: dict[str, np.ndarray], uses: Counter[str]
) -> tuple[Node, str, np.ndarray] | None:
    """(inner node, x, a * b) when `node` scales by b the result of an inner x * a that nothing else reads."""
    outer = _scaling(node, constants)
    inner = kept.get(outer[0]) if outer else None
    if inner is None or uses[inner.outputs[0]] != 1:
        return None
    first = _scaling(inner, constants)
    if first is None:
        return None
    # the product is taken in float64 so that only its final conversion rounds
    return inner, first[0], np.asarray(first[1] * outer[1], dtype=np.float32)


def _scaling(node: Node, constants: dict[str, np.ndarray]) -> tuple[str, np.ndarray] | None:
    """(x, factor) when `node` computes x * factor with a one-element constant factor (as float64), else None."""
    if node.op is Op.MUL:
        for x, c in (node.inputs, node.inputs[::-1]):
            if c in constants and x not in constants and constants[c].size == 1:
                return x, constants[c].astype(np.float64)
    if node.op is Op.DIV:
        x, c = node.inputs
        if c in constants and x not in constants and constants[c].size == 1:
            with np.errstate(divide="ignore"):  # x / 0 and x * inf agree, so a zero divisor folds like any other
                return x, np.asarray(1.0 / constants[c].astype(np.float64))
    return None
