"""Linear fusion: MatMul and Gemm against constant weights become LINEAR, and a following constant Add its bias.

LINEAR computes x · weight[out, in]^T + bias[out]. A Gemm's alpha and transB are folded into the weight and its beta
into the bias. Forms with no LINEAR equivalent (a Gemm with transA set on the batched operand, a right-hand side or a
Gemm C computed at run time) are left as they are, for the backends that cannot run them to report.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from coopnn.graph.ir import Graph, Node, Op
from coopnn.graph.passes.rewrite import NameScope, use_counts

_GEMM_DEFAULTS = {"alpha": 1.0, "beta": 1.0, "trans_a": 0, "trans_b": 0}  # ONNX Gemm's attribute defaults


def fuse_linear(graph: Graph) -> Graph:
    """The graph with every fusable MATMUL and GEMM turned into LINEAR and constant Adds folded into LINEAR biases."""
    return _LinearFuser(graph).run()


def _fits_bias(array: np.ndarray, width: int, rank: int) -> bool:
    """Whether adding `array` to a [..., width] result of `rank` axes is adding one bias vector to every row."""
    return (
        array.ndim <= rank
        and all(d == 1 for d in array.shape[:-1])
        and (array.ndim == 0 or array.shape[-1] in (1, width))
    )


def _as_bias(array: np.ndarray, width: int) -> np.ndarray:
    return np.broadcast_to(array.reshape(-1), (width,)).astype(np.float32)


class _LinearFuser:
    """One walk over the nodes in order, keeping the rewritten list and where each output is now produced."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.uses = use_counts(graph)
        self.names = NameScope(graph)
        self.constants = dict(graph.constants)
        self.transposed: dict[str, str] = {}  # weight constant -> its transpose, shared by every MatMul reading it
        self.nodes: list[Node] = []
        self.position: dict[str, int] = {}

    def run(self) -> Graph:
        for node in self.graph.nodes:
            rewrite = _REWRITES.get(node.op)
            if rewrite is None or not rewrite(self, node):
                self.emit(node)
        return self.graph.with_nodes(self.nodes, self.constants)

    def emit(self, node: Node) -> None:
        self.position[node.outputs[0]] = len(self.nodes)
        self.nodes.append(node)

    def batched(self, name: str) -> bool:
        return self.graph.values[name].batched

    def width(self, name: str) -> int:
        return self.graph.values[name].shape[-1]

    def add_constant(self, base: str, array: np.ndarray) -> str:
        name = self.names.fresh(base)
        self.constants[name] = array
        return name

    def matmul(self, node: Node) -> bool:
        x, weight = node.inputs
        if not self.batched(x) or weight not in self.constants:
            return False
        if weight not in self.transposed:
            self.transposed[weight] = self.add_constant(f"{weight}_t", np.ascontiguousarray(self.constants[weight].T))
        self.emit(Node(Op.LINEAR, node.name, (x, self.transposed[weight]), node.outputs))
        return True

    def gemm(self, node: Node) -> bool:
        a, b, *c = node.inputs
        attrs = {**_GEMM_DEFAULTS, **node.attrs}
        width = self.width(node.outputs[0])
        if attrs["trans_a"] or not self.batched(a) or any(name not in self.constants for name in (b, *c)):
            return False
        if c and not _fits_bias(self.constants[c[0]], width, rank=2):
            return False
        b_array = self.constants[b]
        weight = np.float32(attrs["alpha"]) * (b_array if attrs["trans_b"] else b_array.T)
        inputs = (a, self.add_constant(f"{node.name}_weight", np.ascontiguousarray(weight, dtype=np.float32)))
        if c:
            bias = np.float32(attrs["beta"]) * _as_bias(self.constants[c[0]], width)
            inputs += (self.add_constant(f"{node.name}_bias", bias),)
        self.emit(Node(Op.LINEAR, node.name, inputs, node.outputs))
        return True

    def add(self, node: Node) -> bool:
        for y, c in (node.inputs, node.inputs[::-1]):
            index = self.position.get(y)
            linear = self.nodes[index] if index is not None else None
            if linear is None or linear.op is not Op.LINEAR or linear.activation is not None:
                continue
            width, rank = self.width(y), len(self.graph.values[y].shape)
            x, weight, *old_bias = linear.inputs
            if any(name not in self.constants for name in (c, *old_bias)) or self.uses[y] != 1:
                continue
            if not _fits_bias(self.constants[c], width, rank):
                continue
            bias = _as_bias(self.constants[c], width)
            if old_bias:
                bias = _as_bias(self.constants[old_bias[0]], width) + bias
            inputs = (x, weight, self.add_constant(f"{linear.name}_bias", bias))
            self.nodes[index] = Node(Op.LINEAR, linear.name, inputs, node.outputs, linear.attrs)
            del self.position[y]
            self.position[node.outputs[0]] = index
            return True
        return False


_REWRITES: dict[Op, Callable[[_LinearFuser, Node], bool]] = {
    Op.MATMUL: _LinearFuser.matmul,
    Op.GEMM: _LinearFuser.gemm,
    Op.ADD: _LinearFuser.add,
}
