"""Linear fusion: MatMul and Gemm against constant weights become LINEAR, and constant Adds and Muls after it fold in.

LINEAR computes x · weight[out, in]^T + bias[out]. A Gemm's alpha and transB are folded into the weight and its beta
into the bias; an Add of a per-output constant joins the bias and a Mul by one scales the weight rows and the bias
(so SIREN's sin(30 · linear) becomes one LINEAR that can carry sin). Forms with no LINEAR equivalent (a Gemm with
transA set on the batched operand, a right-hand side or a Gemm C computed at run time) are left as they are, for the
backends that cannot run them to report.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from coopnn.graph.ir import Graph, Node, Op
from coopnn.graph.passes.rewrite import NameScope, use_counts

_GEMM_DEFAULTS = {"alpha": 1.0, "beta": 1.0, "trans_a": 0, "trans_b": 0}  # ONNX Gemm's attribute defaults


def fuse_linear(graph: Graph) -> Graph:
    """The graph with every fusable MATMUL and GEMM turned into LINEAR, and per-output constant Adds and Muls of a
    LINEAR result that nothing else reads folded into the LINEAR's weight and bias."""
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
        with np.errstate(all="ignore"):  # what float32 gives, as onnxruntime does: infinities and NaN included
            weight = np.float32(attrs["alpha"]) * (b_array if attrs["trans_b"] else b_array.T)
        inputs = (a, self.add_constant(f"{node.name}_weight", np.ascontiguousarray(weight, dtype=np.float32)))
        if c:
            with np.errstate(all="ignore"):
                bias = np.float32(attrs["beta"]) * _as_bias(self.constants[c[0]], width)
            inputs += (self.add_constant(f"{node.name}_bias", bias),)
        self.emit(Node(Op.LINEAR, node.name, inputs, node.outputs))
        return True

    def lone_linear(self, name: str) -> int | None:
        """Where the LINEAR producing `name` sits, if it has no activation yet and nothing else reads `name`."""
        index = self.position.get(name)
        if index is None or self.uses[name] != 1:
            return None
        node = self.nodes[index]
        return index if node.op is Op.LINEAR and node.activation is None else None

    def fold_into_linear(self, node: Node) -> bool:
        """An ADD or MUL of a lone LINEAR result and a per-output constant, folded into that LINEAR's parameters."""
        for y, c in (node.inputs, node.inputs[::-1]):
            index = self.lone_linear(y)
            if index is None:
                continue
            linear = self.nodes[index]
            x, weight, *bias = linear.inputs
            width, rank = self.width(y), len(self.graph.values[y].shape)
            if any(name not in self.constants for name in (c, *bias)) or not _fits_bias(self.constants[c], width, rank):
                continue
            folded = _FOLDS[node.op](
                self.constants[weight],
                _as_bias(self.constants[bias[0]], width) if bias else None,
                _as_bias(self.constants[c], width),
            )
            if folded is None:
                continue
            new_weight, new_bias = folded
            if new_weight is not self.constants[weight]:
                weight = self.add_constant(f"{linear.name}_weight", new_weight)
            inputs = (x, weight) + (() if new_bias is None else (self.add_constant(f"{linear.name}_bias", new_bias),))
            self.nodes[index] = Node(Op.LINEAR, linear.name, inputs, node.outputs, linear.attrs)
            del self.position[y]
            self.position[node.outputs[0]] = index
            return True
        return False


def _add_to_linear(weight: np.ndarray, bias: np.ndarray | None, addend: np.ndarray):
    return weight, addend if bias is None else bias + addend


def _scale_linear(weight: np.ndarray, bias: np.ndarray | None, factor: np.ndarray):
    if not np.all(np.isfinite(factor)):
        return None  # x · (w * inf) and (x · w) * inf disagree where x · w is zero
    return weight * factor[:, None], None if bias is None else bias * factor


# (weight [out, in], bias [out] or None, per-output constant [out]) -> the new (weight, bias), or None to leave it
_FOLDS: dict[Op, Callable[[np.ndarray, np.ndarray | None, np.ndarray], tuple | None]] = {
    Op.ADD: _add_to_linear,
    Op.MUL: _scale_linear,
}

_REWRITES: dict[Op, Callable[[_LinearFuser, Node], bool]] = {
    Op.MATMUL: _LinearFuser.matmul,
    Op.GEMM: _LinearFuser.gemm,
    Op.ADD: _LinearFuser.fold_into_linear,
    Op.MUL: _LinearFuser.fold_into_linear,
}
