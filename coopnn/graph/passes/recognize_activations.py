"""Activation recognition: the elementwise subgraphs exporters write for an activation become that activation's node.

Exporters write GELU below opset 20 as arithmetic on Erf (exact) or Tanh (the tanh form), and SiLU at every opset as
x * Sigmoid(x). As one node, the activation rides on the LINEAR before it (fuse_activation, which runs next), so the
GPU training kernels train that layer with the activation's derivative rule instead of stopping their layer chain at
it. A subgraph is taken only when its intermediate values have no reader outside it and are not graph outputs, and
its constants are the activation's own as float32 scalars; its last node's name and output stay.
"""

from __future__ import annotations

from itertools import permutations
from typing import Callable

import numpy as np

from coopnn.graph.activations import GELU_TANH_COEFFICIENT, SQRT_2_OVER_PI
from coopnn.graph.ir import Graph, Node, Op
from coopnn.graph.passes.rewrite import use_counts

_SQRT_2 = np.sqrt(2.0)


class _Expression:
    """What a pattern asks of the graph: the single-use producer of a value, scalar constants, product factors."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.producers = {out: node for node in graph.nodes for out in node.outputs}
        self.uses = use_counts(graph)

    def inner(self, value: str, op: Op) -> Node | None:
        """The `op` node computing `value` when nothing else reads `value` (so the pattern may absorb it)."""
        node = self.producers.get(value)
        return node if node is not None and node.op is op and self.uses[value] == 1 else None

    def is_scalar(self, value: str, expected: float) -> bool:
        array = self.graph.constants.get(value)
        return array is not None and array.size == 1 and np.float32(array.reshape(())) == np.float32(expected)

    def factors(self, node: Node) -> tuple[list[str], list[Node]]:
        """The factors of the product `node` computes, through the single-use MUL nodes feeding it, and those nodes."""
        factors, nodes = [], [node]
        for value in node.inputs:
            inner = self.inner(value, Op.MUL)
            if inner is None:
                factors.append(value)
            else:
                more, inner_nodes = self.factors(inner)
                factors += more
                nodes += inner_nodes
        return factors, nodes

    def pair(self, node: Node | None, constant: float) -> str | None:
        """The operand of the two-input `node` whose other operand is the scalar `constant`."""
        if node is None:
            return None
        return next((a for a, b in permutations(node.inputs) if self.is_scalar(b, constant)), None)


Match = tuple[Op, dict, str, list[Node]]  # the activation, its attributes, its input and the nodes it replaces


def _silu(e: _Expression, factors: list[str]) -> Match | None:
    """x * sigmoid(x)"""
    for x, gate in permutations(factors) if len(factors) == 2 else ():
        sigmoid = e.inner(gate, Op.SIGMOID)
        if sigmoid is not None and sigmoid.inputs[0] == x:
            return Op.SILU, {}, x, [sigmoid]
    return None


def _erf_part(e: _Expression, value: str, x: str) -> list[Node] | None:
    """erf(x / sqrt 2), or erf(x * (1 / sqrt 2))"""
    erf = e.inner(value, Op.ERF)
    if erf is None:
        return None
    divide, scale = e.inner(erf.inputs[0], Op.DIV), e.inner(erf.inputs[0], Op.MUL)
    if divide is not None and divide.inputs[0] == x and e.is_scalar(divide.inputs[1], _SQRT_2):
        return [erf, divide]
    if e.pair(scale, 1 / _SQRT_2) == x:
        return [erf, scale]
    return None


def _tanh_part(e: _Expression, value: str, x: str) -> list[Node] | None:
    """tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))"""
    tanh = e.inner(value, Op.TANH)
    scale = e.inner(tanh.inputs[0], Op.MUL) if tanh is not None else None
    inner = e.pair(scale, SQRT_2_OVER_PI)
    total = e.inner(inner, Op.ADD) if inner is not None else None
    if total is None or x not in total.inputs:
        return None
    cubic = e.inner(total.inputs[1] if total.inputs[0] == x else total.inputs[0], Op.MUL)
    power = e.pair(cubic, GELU_TANH_COEFFICIENT)
    pow_node = e.inner(power, Op.POW) if power is not None else None
    if pow_node is None or pow_node.inputs[0] != x or not e.is_scalar(pow_node.inputs[1], 3.0):
        return None
    return [tanh, scale, total, cubic, pow_node]


def _gelu(e: _Expression, factors: list[str]) -> Match | None:
    """0.5 * x * (1 + erf(x / sqrt 2)), or with the tanh form in place of the erf"""
    for x, half, gate in permutations(factors) if len(factors) == 3 else ():
        one_plus = e.inner(gate, Op.ADD)
        part = e.pair(one_plus, 1.0) if e.is_scalar(half, 0.5) else None
        if part is None:
            continue
        for approximate, rule in (("none", _erf_part), ("tanh", _tanh_part)):
            nodes = rule(e, part, x)
            if nodes is not None:
                return Op.GELU, {"approximate": approximate}, x, [one_plus, *nodes]
    return None


PATTERNS: tuple[Callable[[_Expression, list[str]], Match | None], ...] = (_silu, _gelu)


def recognize_activations(graph: Graph) -> Graph:
    """The graph with each decomposed GELU or SiLU (a product of the activation's factors) as one activation node."""
    e = _Expression(graph)
    replaced: dict[str, Node] = {}  # last node of a pattern -> the activation node
    absorbed: set[str] = set()
    for node in reversed(graph.nodes):  # outermost products first, so a pattern is taken whole
        if node.op is not Op.MUL or node.name in absorbed:
            continue
        factors, products = e.factors(node)
        match = next((m for m in (pattern(e, factors) for pattern in PATTERNS) if m is not None), None)
        if match is None:
            continue
        op, attrs, x, nodes = match
        same_shape = graph.values[x].shape == graph.values[node.outputs[0]].shape
        if not same_shape or graph.values[x].dtype != "f32":
            continue
        replaced[node.name] = Node(op, node.name, (x,), node.outputs, attrs)
        absorbed.update(n.name for n in products + nodes if n is not node)
    nodes = [replaced.get(node.name, node) for node in graph.nodes if node.name not in absorbed]
    return graph.with_nodes(nodes)
