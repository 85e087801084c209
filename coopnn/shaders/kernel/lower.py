"""Lowering from the graph IR to a kernel program: one lowering function per graph operator, in a registry.

Every batched graph value becomes one coopvector holding a sample's features flattened row-major. Broadcasting,
slicing, concatenation, reshapes and transposes become `gather` instructions whose indices are computed here, by
running the operator's own numpy semantics on arrays of component numbers.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from coopnn.errors import CompileError
from coopnn.graph import ops
from coopnn.graph.ir import Graph, Node, Op, Value
from coopnn.registry import registrar
from coopnn.shaders.kernel import activations
from coopnn.shaders.kernel.builder import KernelBuilder
from coopnn.shaders.kernel.program import KernelProgram, VecType

Lowering = Callable[["Lowerer", Node], str]
LOWERINGS: dict[Op, Lowering] = {}


lowering = registrar(LOWERINGS)  # @lowering(Op.X, ...)


class Lowerer:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.k = KernelBuilder(graph.name)
        self.vectors: dict[str, str] = {}  # batched graph value -> kernel value
        # whether the graph's parameters stay as they are (inference, `lower`); a training step kernel lowers its
        # prefix node by node, where a parameter read there would be trained by nothing
        self.parameters_fixed = False

    def value(self, name: str) -> Value:
        return self.graph.values[name]

    def operand(self, name: str, out_shape: tuple) -> str:
        """Graph value `name` as a kernel vector laid out like a sample of shape `out_shape` (broadcast)."""
        out_features = tuple(out_shape[1:])
        size = int(np.prod(out_features, dtype=np.int64))
        if self.graph.is_constant(name):
            array = np.asarray(self.graph.constants[name])
            if array.ndim == len(out_shape):
                array = array[0]  # the constant's axis 0 broadcasts over the batch (verified size 1)
            array = np.broadcast_to(array, out_features)
            if array.dtype == np.bool_:
                raise CompileError(f"boolean constant {name!r} is not supported by the kernel targets")
            flat = array.ravel()
            if np.all(flat == flat[0]) and size > 0:
                return self.k.splat(float(flat[0]), size)
            return self.k.emit("load", VecType("f32", size), (self.k.constant_param(flat, "vector", "c"),))
        value = self.value(name)
        source = self.vectors[name]
        if value.features == out_features:
            return source
        numbers = np.arange(value.feature_size).reshape(value.features)
        numbers = np.broadcast_to(numbers, out_features).ravel()
        return self.k.gather([source], [(0, int(i)) for i in numbers])

    def lower_inputs(self) -> None:
        """A parameter and a load for every graph input."""
        for v in self.graph.inputs:
            param = self.k.add_param(f"in{len(self.k.params)}", "input", (v.feature_size,), v.name)
            self.vectors[v.name] = self.k.emit("load", VecType("f32", v.feature_size), (param.name,))

    def lower_node(self, node: Node) -> None:
        if not self.value(node.outputs[0]).batched:
            raise CompileError(f"node {node.name!r} computes a constant; run the constant-folding pass first")
        fn = LOWERINGS.get(node.op)
        if fn is None:
            raise CompileError(
                f"node {node.name!r}: operator {node.op.value} has no kernel lowering "
                f"(a MatMul or Gemm whose weights are not constant cannot run on a kernel target)"
            )
        self.vectors[node.outputs[0]] = fn(self, node)

    def lower(self) -> KernelProgram:
        self.parameters_fixed = True
        self.lower_inputs()
        for node in self.graph.nodes:
            self.lower_node(node)
        for v in self.graph.outputs:
            param = self.k.add_param(f"out{len(self.k.params)}", "output", (v.feature_size,), v.name)
            source = self.vectors[v.name]
            if v.dtype == "bool":
                source = self.k.emit("cast", VecType("f32", v.feature_size), (source,))
            self.k.emit("store", None, (source, param.name))
        return self.k.build()


def lower(graph: Graph) -> KernelProgram:
    """The kernel program of an optimised graph; raises CompileError for what the kernel level cannot express."""
    return Lowerer(graph).lower()


def _out_shape(lw: Lowerer, node: Node) -> tuple:
    return lw.value(node.outputs[0]).shape


@lowering(Op.LINEAR)
def _linear(lw: Lowerer, node: Node) -> str:
    x = lw.value(node.inputs[0])
    weight = np.asarray(lw.graph.constants[node.inputs[1]], np.float32)
    bias = np.asarray(lw.graph.constants[node.inputs[2]], np.float32).reshape(-1) if len(node.inputs) > 2 else None
    rows, cols = weight.shape
    w = lw.k.constant_param(weight, "matrix", "w", source=node.inputs[1])
    b = lw.k.constant_param(bias, "vector", "b", source=node.inputs[2]) if bias is not None else None
    source = lw.vectors[x.name]
    groups = x.feature_size // cols
    # A linear over a sample of shape [..., cols] applies the matrix to each row of the sample.
    outs = []
    for g in range(groups):
        row = lw.k.gather([source], [(0, g * cols + i) for i in range(cols)])
        # `layer`: where a weight format that quantizes inputs finds this Linear's input scale
        outs.append(lw.k.emit("gemv", VecType("f32", rows), (w, row) + ((b,) if b else ()), transpose=False,
                              layer=node.name))
    y = outs[0] if groups == 1 else lw.k.gather(outs, [(g, i) for g in range(groups) for i in range(rows)])
    act = node.activation
    return y if act is None else activations.apply(lw.k, act.op, y, act.attrs)


@lowering(Op.ENCODING)
def _encoding(lw: Lowerer, node: Node) -> str:
    """One `encode` instruction; the parameter vector (a grid's tables) is a constant vector parameter that keeps
    the graph constant's name, so trained tables reach a compiled model as other weights do."""
    x = lw.vectors[node.inputs[0]]
    params = ()
    if len(node.inputs) > 1 and not lw.parameters_fixed:
        raise CompileError(f"node {node.name!r}: the GPU training kernels do not train the parameters of "
                           f"{node.attrs['encoding'].describe()} yet (they train encodings without parameters); "
                           "train it with backend='numpy'")
    if len(node.inputs) > 1:
        table = np.asarray(lw.graph.constants[node.inputs[1]], np.float32).reshape(-1)
        params = (lw.k.constant_param(table, "vector", "e", source=node.inputs[1]),)
    return lw.k.emit("encode", None, (x,) + params, encoding=node.attrs["encoding"])


@lowering(*activations.EXPANSIONS)
def _unary(lw: Lowerer, node: Node) -> str:
    return activations.apply(lw.k, node.op, lw.vectors[node.inputs[0]], node.attrs)


_BINARY = {Op.ADD: "add", Op.SUB: "sub", Op.MUL: "mul", Op.DIV: "div", Op.MAX: "max", Op.MIN: "min",
           Op.AND: "and", Op.OR: "or", Op.XOR: "xor"}
_COMPARE = {Op.LESS: "cmp.lt", Op.LESS_EQUAL: "cmp.le", Op.GREATER: "cmp.gt", Op.GREATER_EQUAL: "cmp.ge",
            Op.EQUAL: "cmp.eq"}


def _operands(lw: Lowerer, node: Node) -> list[str]:
    shape = _out_shape(lw, node)
    return [lw.operand(name, shape) for name in node.inputs]


@lowering(*_BINARY)
def _binary(lw: Lowerer, node: Node) -> str:
    a, b = _operands(lw, node)
    return lw.k.binary(_BINARY[node.op], a, b)


@lowering(*_COMPARE)
def _compare(lw: Lowerer, node: Node) -> str:
    a, b = _operands(lw, node)
    return lw.k.compare(_COMPARE[node.op], a, b)


@lowering(Op.POW)
def _pow(lw: Lowerer, node: Node) -> str:
    exponent = lw.graph.constants.get(node.inputs[1])
    a, b = _operands(lw, node)
    if exponent is not None and exponent.size == 1:
        # exact squares and square roots, as the reference computes them, instead of exp(log(x) * e)
        e = float(exponent.reshape(-1)[0])
        if e == 2.0:
            return lw.k.binary("mul", a, a)
        if e == 1.0:
            return a
        if e == 0.5:
            return lw.k.unary("sqrt", a)
    return lw.k.binary("pow", a, b)


@lowering(Op.PRELU)
def _prelu(lw: Lowerer, node: Node) -> str:
    x, slope = _operands(lw, node)
    zero = lw.k.splat(0.0, lw.k.type_of(x).size)
    return lw.k.select(lw.k.compare("cmp.ge", x, zero), x, lw.k.binary("mul", x, slope))


@lowering(Op.WHERE)
def _where(lw: Lowerer, node: Node) -> str:
    cond, a, b = _operands(lw, node)
    return lw.k.select(cond, a, b)


@lowering(Op.CAST)
def _cast(lw: Lowerer, node: Node) -> str:
    x = lw.vectors[node.inputs[0]]
    to = node.attrs["to"]
    if lw.k.type_of(x).dtype == to:
        return x
    return lw.k.emit("cast", VecType(to, lw.k.type_of(x).size), (x,))


def _index_map(lw: Lowerer, node: Node) -> tuple[list[str], list[tuple[int, int]]]:
    """Which source component each output component of a data-movement node comes from."""
    sources, numbered, base = [], [], 0
    for name in node.inputs:
        v = lw.value(name)
        sources.append(lw.vectors[name])
        numbered.append((base + np.arange(v.feature_size, dtype=np.float64).reshape((1,) + v.features)))
        base += v.feature_size
    moved = np.asarray(ops.evaluate(node.op, numbered, node.attrs), np.float64).ravel().astype(np.int64)
    starts = np.cumsum([0] + [lw.value(n).feature_size for n in node.inputs])
    src = np.searchsorted(starts, moved, side="right") - 1
    return sources, [(int(s), int(m - starts[s])) for s, m in zip(src, moved)]


@lowering(Op.CONCAT, Op.SLICE, Op.RESHAPE, Op.TRANSPOSE)
def _move(lw: Lowerer, node: Node) -> str:
    sources, index = _index_map(lw, node)
    return lw.k.gather(sources, index)


def _to_last_axes(lw: Lowerer, x: str, features: tuple, axes: tuple[int, ...]) -> tuple[str, list[int]]:
    """x with the feature axes `axes` moved last (grouped contiguously), and the permutation used."""
    rest = [a for a in range(len(features)) if a not in axes]
    perm = rest + list(axes)
    numbers = np.arange(int(np.prod(features))).reshape(features).transpose(perm).ravel()
    return lw.k.gather([x], [(0, int(i)) for i in numbers]), perm


def _from_last_axes(lw: Lowerer, x: str, features: tuple, perm: list[int]) -> str:
    moved = tuple(features[p] for p in perm)
    numbers = np.arange(int(np.prod(features))).reshape(moved).transpose(np.argsort(perm)).ravel()
    return lw.k.gather([x], [(0, int(i)) for i in numbers])


def _repeat(lw: Lowerer, x: str, times: int) -> str:
    size = lw.k.type_of(x).size
    return lw.k.gather([x], [(0, i) for i in range(size) for _ in range(times)])


def _feature_axes(value: Value, axes) -> tuple[int, ...]:
    return tuple(sorted((a % len(value.shape)) - 1 for a in axes))


@lowering(Op.SOFTMAX, Op.LOG_SOFTMAX)
def _softmax(lw: Lowerer, node: Node) -> str:
    v = lw.value(node.inputs[0])
    axes = _feature_axes(v, [node.attrs["axis"]])
    group = v.features[axes[0]]
    x, perm = _to_last_axes(lw, lw.vectors[v.name], v.features, axes)
    shifted = lw.k.binary("sub", x, _repeat(lw, lw.k.reduce("reduce_max", x, group), group))
    e = lw.k.unary("exp", shifted)
    total = _repeat(lw, lw.k.reduce("reduce_sum", e, group), group)
    if node.op is Op.LOG_SOFTMAX:
        y = lw.k.binary("sub", shifted, lw.k.unary("log", total))
    else:
        y = lw.k.binary("div", e, total)
    return _from_last_axes(lw, y, v.features, perm)


@lowering(Op.LAYER_NORM)
def _layer_norm(lw: Lowerer, node: Node) -> str:
    v = lw.value(node.inputs[0])
    first = node.attrs["axis"] % len(v.shape)
    group = int(np.prod(v.shape[first:]))
    x = lw.vectors[v.name]
    mean = _repeat(lw, lw.k.scalar("div", lw.k.reduce("reduce_sum", x, group), group), group)
    centred = lw.k.binary("sub", x, mean)
    var = lw.k.scalar("div", lw.k.reduce("reduce_sum", lw.k.binary("mul", centred, centred), group), group)
    inv = lw.k.scalar("div", lw.k.unary("sqrt", lw.k.scalar("add", var, node.attrs.get("epsilon", 1e-5))), 1.0,
                      left=True)
    y = lw.k.binary("mul", centred, _repeat(lw, inv, group))
    shape = _out_shape(lw, node)
    y = lw.k.binary("mul", y, lw.operand(node.inputs[1], shape))
    if len(node.inputs) > 2:
        y = lw.k.binary("add", y, lw.operand(node.inputs[2], shape))
    return y


_REDUCE = {Op.REDUCE_SUM: "reduce_sum", Op.REDUCE_MEAN: "reduce_sum", Op.REDUCE_MAX: "reduce_max"}


@lowering(Op.REDUCE_SUM, Op.REDUCE_MEAN, Op.REDUCE_MAX, Op.REDUCE_MIN)
def _reduce(lw: Lowerer, node: Node) -> str:
    v = lw.value(node.inputs[0])
    axes = _feature_axes(v, node.attrs["axes"])
    group = int(np.prod([v.features[a] for a in axes]))
    x, _ = _to_last_axes(lw, lw.vectors[v.name], v.features, axes)
    if node.op is Op.REDUCE_MIN:
        y = lw.k.unary("neg", lw.k.reduce("reduce_max", lw.k.unary("neg", x), group))
    else:
        y = lw.k.reduce(_REDUCE[node.op], x, group)
    if node.op is Op.REDUCE_MEAN:
        y = lw.k.scalar("div", y, group)
    return y  # keepdims only changes the shape record, not the flattened order of the kept axes
