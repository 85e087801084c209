"""Analytic reverse mode over the graph IR: a forward pass that keeps what the backward pass needs, then gradients.

`GradientProgram(graph)` decides once which nodes need a backward rule: those that depend on a parameter (see
`coopnn.graph.parameters`) and lead to an output. Nodes that only touch inputs (an input encoding) or only build
booleans (comparisons, the condition of a Where) need none. A needed node without a rule raises CompileError naming
it. Rules follow `coopnn.graph.ops` and compute in the arrays' dtype, float32 in training and float64 in checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from coopnn.errors import CompileError
from coopnn.graph import ops
from coopnn.graph.ir import Graph, Node, Op
from coopnn.graph.ops import forward_defaults
from coopnn.train.activation_grads import DIFFERENTIABLE_UNARY, derivative
from coopnn.graph.parameters import parameter_constants

Array = np.ndarray


@dataclass
class Record:
    """One node's evaluation: its input arrays, its output, and (for a LINEAR with an activation) its pre-activation."""

    node: Node
    inputs: list[Array]
    output: Array
    pre_activation: Array | None = None


@dataclass
class Tape:
    """What the forward pass keeps: every value by name and a record of each node the backward pass visits."""

    values: dict[str, Array]
    records: dict[str, Record]


def _unbroadcast(gradient: Array, shape: tuple) -> Array:
    """`gradient` of a broadcast result summed back to the operand's `shape`."""
    extra = gradient.ndim - len(shape)
    if extra:
        gradient = gradient.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and gradient.shape[i] != 1)
    return gradient.sum(axis=axes, keepdims=True) if axes else gradient


def _linear(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    x, weight, *bias = r.inputs
    act = r.node.activation
    if act is not None:
        g = g * derivative(act.op, r.pre_activation, r.output, act.attrs)
    rows = g.reshape(-1, g.shape[-1])
    grads: list[Array | None] = [g @ weight if needs[0] else None]
    grads.append(rows.T @ x.reshape(-1, x.shape[-1]) if needs[1] else None)
    if bias:
        grads.append(rows.sum(axis=0).reshape(bias[0].shape) if needs[2] else None)
    return grads


def _unary(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    return [g * derivative(r.node.op, r.inputs[0], r.output, r.node.attrs)]


def _elementwise(partials: Callable[[Array, Array, Array, Array], tuple[Callable[[], Array], Callable[[], Array]]]):
    """A binary rule from the partial gradients (computed only for the operands that need one), unbroadcast."""

    def rule(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
        a, b = r.inputs
        lazy = partials(a, b, r.output, g)
        return [_unbroadcast(np.broadcast_to(f(), r.output.shape), operand.shape) if need else None
                for f, operand, need in zip(lazy, (a, b), needs)]

    return rule


def _max_share(a: Array, b: Array) -> Array:
    """How much of the gradient of max(a, b) goes to a: all where a wins, half at ties (as PyTorch splits it)."""
    return (a > b) + 0.5 * (a == b)


_BINARY_PARTIALS = {
    Op.ADD: lambda a, b, y, g: (lambda: g, lambda: g),
    Op.SUB: lambda a, b, y, g: (lambda: g, lambda: -g),
    Op.MUL: lambda a, b, y, g: (lambda: g * b, lambda: g * a),
    Op.DIV: lambda a, b, y, g: (lambda: g / b, lambda: -g * a / (b * b)),
    Op.POW: lambda a, b, y, g: (lambda: g * b * np.power(a, b - 1), lambda: g * y * np.log(a)),
    Op.MAX: lambda a, b, y, g: (lambda: g * _max_share(a, b), lambda: g * _max_share(b, a)),
    Op.MIN: lambda a, b, y, g: (lambda: g * _max_share(b, a), lambda: g * _max_share(a, b)),
    Op.PRELU: lambda a, b, y, g: (lambda: np.where(a >= 0, g, g * b), lambda: np.where(a >= 0, 0, g * a)),
}


def _where(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    condition, a, b = r.inputs
    zero = np.zeros((), g.dtype)
    return [None] + [_unbroadcast(np.where(pick, g, zero), operand.shape) if need else None
                     for pick, operand, need in ((condition, a, needs[1]), (~condition, b, needs[2]))]


def _cast(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    return [g]  # reached only from f32 to f32: a bool input or output never carries a gradient


def _concat(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    axis = r.node.attrs["axis"] % g.ndim
    bounds = np.cumsum([x.shape[axis] for x in r.inputs])[:-1]
    parts = np.split(g, bounds, axis=axis)
    return [_unbroadcast(part, x.shape) if need else None for part, x, need in zip(parts, r.inputs, needs)]


def _slice(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    a = r.node.attrs
    x = r.inputs[0]
    full = np.zeros(x.shape, g.dtype)
    index = [slice(None)] * x.ndim
    index[a["axis"]] = slice(a["start"], a["stop"] if a["stop"] >= 0 else None, a["step"])
    full[tuple(index)] = g
    return [full]


def _transpose(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    return [np.transpose(g, np.argsort(r.node.attrs["perm"]))]


def _softmax(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    y, axis = r.output, r.node.attrs["axis"]
    return [y * (g - np.sum(g * y, axis=axis, keepdims=True))]


def _log_softmax(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    axis = r.node.attrs["axis"]
    return [g - np.exp(r.output) * np.sum(g, axis=axis, keepdims=True)]


def _reduced_gradient(r: Record, g: Array) -> tuple[Array, Array, tuple[int, ...]]:
    """The gradient and output of a reduction with the reduced axes kept (as size 1), and those axes."""
    x = r.inputs[0]
    axes = tuple(a % x.ndim for a in r.node.attrs["axes"])
    if r.node.attrs.get("keepdims", True):
        return g, r.output, axes
    return np.expand_dims(g, axes), np.expand_dims(r.output, axes), axes


def _reduce_sum(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    return [np.broadcast_to(_reduced_gradient(r, g)[0], r.inputs[0].shape)]


def _reduce_mean(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    g, _, axes = _reduced_gradient(r, g)
    count = int(np.prod([r.inputs[0].shape[a] for a in axes]))
    return [np.broadcast_to(g / count, r.inputs[0].shape)]


def _reduce_extreme(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    """Max and min: the gradient goes to the elements equal to the result, shared evenly among ties."""
    g, y, axes = _reduced_gradient(r, g)
    hits = r.inputs[0] == y
    return [g * hits / np.sum(hits, axis=axes, keepdims=True)]


def _layer_norm(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    x, scale, *bias = r.inputs
    attrs = {**forward_defaults(Op.LAYER_NORM), **r.node.attrs}
    axes = tuple(range(attrs["axis"] % x.ndim, x.ndim))
    centred = x - np.mean(x, axis=axes, keepdims=True)
    inverse_std = 1 / np.sqrt(np.mean(centred * centred, axis=axes, keepdims=True) + attrs["epsilon"])
    normalised = centred * inverse_std
    grads: list[Array | None] = [None] * len(r.inputs)
    if needs[0]:
        gn = np.broadcast_to(g * scale, x.shape)
        grads[0] = inverse_std * (gn - np.mean(gn, axis=axes, keepdims=True)
                                  - normalised * np.mean(gn * normalised, axis=axes, keepdims=True))
    if needs[1]:
        grads[1] = _unbroadcast(g * normalised, scale.shape)
    if bias and needs[2]:
        grads[2] = _unbroadcast(np.broadcast_to(g, r.output.shape), bias[0].shape)
    return grads


def _encoding(r: Record, g: Array, needs: Sequence[bool]) -> list[Array | None]:
    """The encoding's own analytic backward pass (`coopnn.graph.encodings.base.Encoding.backward`)."""
    x, *params = r.inputs
    d_params, d_x = r.node.attrs["encoding"].backward(x, params[0] if params else np.zeros(0, np.float32), g,
                                                      input_gradient=needs[0])
    return [d_x.astype(g.dtype) if needs[0] else None] + ([d_params.astype(g.dtype)] if params else [])


Rule = Callable[[Record, Array, Sequence[bool]], list]

RULES: dict[Op, Rule] = {
    Op.LINEAR: _linear,
    **{op: _unary for op in DIFFERENTIABLE_UNARY},
    **{op: _elementwise(partials) for op, partials in _BINARY_PARTIALS.items()},
    Op.WHERE: _where,
    Op.CAST: _cast,
    Op.CONCAT: _concat,
    Op.SLICE: _slice,
    Op.RESHAPE: lambda r, g, needs: [g.reshape(r.inputs[0].shape)],
    Op.TRANSPOSE: _transpose,
    Op.SOFTMAX: _softmax,
    Op.LOG_SOFTMAX: _log_softmax,
    Op.LAYER_NORM: _layer_norm,
    Op.REDUCE_SUM: _reduce_sum,
    Op.REDUCE_MEAN: _reduce_mean,
    Op.REDUCE_MAX: _reduce_extreme,
    Op.REDUCE_MIN: _reduce_extreme,
    Op.ENCODING: _encoding,
}


def differentiable_operators() -> list[str]:
    return sorted(op.value for op in RULES)


class GradientProgram:
    """A graph checked for reverse mode: which values carry gradients and which nodes the backward pass visits."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.parameters = parameter_constants(graph)  # stable name -> constant
        carries = set(self.parameters.values())  # values that depend on a parameter
        for node in graph.nodes:
            if any(name in carries for name in node.inputs) and graph.values[node.outputs[0]].dtype == "f32":
                carries.add(node.outputs[0])
        reaches = {v.name for v in graph.outputs}  # values an output depends on
        for node in reversed(graph.nodes):
            if node.outputs[0] in reaches:
                reaches.update(node.inputs)
        self.carries = carries & reaches
        self.visited = [node for node in graph.nodes if node.outputs[0] in self.carries]
        for node in self.visited:
            self._check(node)

    def _check(self, node: Node) -> None:
        act = node.activation if node.op is Op.LINEAR else None
        if node.op not in RULES:
            what = node.op.value
        elif act is not None and act.op not in DIFFERENTIABLE_UNARY:
            what = f"its activation {act.op.value}"
        else:
            return
        raise CompileError(
            f"node {node.name!r} ({node.op.value}) cannot be trained through: {what} has no gradient, and parameters "
            f"reach the outputs through it. Differentiable operators: {', '.join(differentiable_operators())}"
        )

    def forward(self, feeds: Mapping[str, Array], constants: Mapping[str, Array]) -> Tape:
        """Evaluate the graph on `feeds` with `constants` (parameters included), keeping what backward needs."""
        values: dict[str, Array] = {**constants, **feeds}
        records: dict[str, Record] = {}
        visited = {node.name for node in self.visited}
        for node in self.graph.nodes:
            inputs = [values[name] for name in node.inputs]
            pre_activation = None
            if node.op is Op.LINEAR and node.activation is not None:
                act = node.activation
                pre_activation = ops.evaluate(Op.LINEAR, inputs, {})
                output = ops.evaluate(act.op, [pre_activation], act.attrs)
            else:
                output = ops.evaluate(node.op, inputs, node.attrs)
            values[node.outputs[0]] = output
            if node.name in visited:
                records[node.name] = Record(node, inputs, output, pre_activation)
        return Tape(values, records)

    def outputs(self, tape: Tape, batch: int) -> dict[str, Array]:
        """The graph outputs from a forward pass, each with its batch axis."""
        return {v.name: np.broadcast_to(tape.values[v.name], (batch,) + v.features) for v in self.graph.outputs}

    def backward(self, tape: Tape, output_gradients: Mapping[str, Array]) -> dict[str, Array]:
        """Gradients of the parameters (by stable name) given the gradients of the loss in the graph outputs."""
        grads: dict[str, Array] = {}
        for name, g in output_gradients.items():
            if name in self.carries:
                grads[name] = _unbroadcast(g, tape.values[name].shape)
        for node in reversed(self.visited):
            g = grads.pop(node.outputs[0], None)
            if g is None:
                continue
            needs = [name in self.carries for name in node.inputs]
            for name, grad in zip(node.inputs, RULES[node.op](tape.records[node.name], g, needs)):
                if grad is not None and name in self.carries:
                    grads[name] = grads[name] + grad if name in grads else grad
        return {stable: grads.get(constant, np.zeros_like(tape.values[constant]))
                for stable, constant in self.parameters.items()}
