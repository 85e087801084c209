"""Elementwise operators of the input stage: the unary ones through the shared scalar functions
(`coopnn.export.activations`), the binary float ones as operators or calls, one statement per element."""

from __future__ import annotations

from coopnn.export import activations
from coopnn.graph.ir import Op

BINARY = {
    Op.ADD: lambda a, b: f"{a} + {b}",
    Op.SUB: lambda a, b: f"{a} - {b}",
    Op.MUL: lambda a, b: f"{a} * {b}",
    Op.DIV: lambda a, b: f"{a} / {b}",
    Op.MAX: lambda a, b: f"max({a}, {b})",
    Op.MIN: lambda a, b: f"min({a}, {b})",
    Op.POW: lambda a, b: f"pow({a}, {b})",
}


def _unary(node, operands, program):
    what = f"node {node.name!r}"
    activations.body(node.op, node.attrs, what)  # refuses an operator or attributes with no shader function
    return [program.apply(lambda x: activations.apply(node.op, node.attrs, x, what), operands[0])]


def _binary(node, operands, program):
    return [program.apply(BINARY[node.op], *operands)]


LOWERINGS = {**{op: _unary for op in activations.BODIES}, **{op: _binary for op in BINARY}}
