"""The graph IR: frozen dataclasses for values, nodes and graphs, and the vocabulary of operators.

Invariants (checked by `coopnn.graph.verify`):
- a value that depends on the model's inputs is *batched*: its shape starts with None, the free batch axis, and no
  other axis is None; every other axis is a fixed feature size;
- constants are numpy arrays held by the graph, never batched; their shapes broadcast against batched values with
  numpy's rules (a constant of the same rank has 1 on axis 0);
- batched values are float32 ("f32") or boolean ("bool"); the element type a backend computes in is the backend's
  business, not the graph's;
- nodes are in topological order and every value is produced once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import numpy as np

Shape = tuple  # of int, with None only at axis 0 of batched values


class Op(str, enum.Enum):
    """Every operator a graph may hold. Semantics, arity and shape rules live in `coopnn.graph.ops`."""

    LINEAR = "linear"  # x[..., in] · weight[out, in]^T + bias[out], then the fused activation if any
    MATMUL = "matmul"  # x[..., k] @ b[k, m] (ONNX MatMul); fuse_linear turns it into LINEAR
    GEMM = "gemm"  # ONNX Gemm with alpha, beta, trans_a, trans_b; fuse_linear turns it into LINEAR

    RELU = "relu"
    LEAKY_RELU = "leaky_relu"
    ELU = "elu"
    SELU = "selu"
    CELU = "celu"
    SIGMOID = "sigmoid"
    HARD_SIGMOID = "hard_sigmoid"
    HARD_SWISH = "hard_swish"
    TANH = "tanh"
    SOFTPLUS = "softplus"
    SOFTSIGN = "softsign"
    GELU = "gelu"
    SILU = "silu"
    MISH = "mish"
    CLIP = "clip"
    EXP = "exp"
    LOG = "log"
    SIN = "sin"
    COS = "cos"
    NEG = "neg"
    ABS = "abs"
    SQRT = "sqrt"
    RECIPROCAL = "reciprocal"
    ERF = "erf"
    FLOOR = "floor"
    CEIL = "ceil"
    SIGN = "sign"
    TL_FUNCTION = "tl_function"  # attrs: text, function, derivative (a tensor-language function: coopnn.tl.activation)
    IDENTITY = "identity"
    NOT = "not"

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    POW = "pow"
    MAX = "max"
    MIN = "min"
    PRELU = "prelu"
    LESS = "less"
    LESS_EQUAL = "less_equal"
    GREATER = "greater"
    GREATER_EQUAL = "greater_equal"
    EQUAL = "equal"
    AND = "and"
    OR = "or"
    XOR = "xor"
    WHERE = "where"

    CAST = "cast"  # attrs: to ("f32" or "bool")
    CONCAT = "concat"  # attrs: axis
    SLICE = "slice"  # attrs: axis, start, stop, step (one axis, normalised, non-negative)
    RESHAPE = "reshape"  # attrs: shape (the full output shape, None at axis 0 when batched)
    TRANSPOSE = "transpose"  # attrs: perm (keeps axis 0 in place for batched values)
    SOFTMAX = "softmax"  # attrs: axis
    LOG_SOFTMAX = "log_softmax"  # attrs: axis
    LAYER_NORM = "layer_norm"  # inputs: x, scale, bias?; attrs: axis, epsilon (normalises axes axis..rank-1)
    REDUCE_SUM = "reduce_sum"  # attrs: axes, keepdims (feature axes only)
    REDUCE_MEAN = "reduce_mean"
    REDUCE_MAX = "reduce_max"
    REDUCE_MIN = "reduce_min"

    ENCODING = "encoding"  # inputs: x[batch, n_in], params[n]? (a constant); attrs: encoding (coopnn.graph.encodings)


def freeze_attrs(attrs: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy of `attrs` with lists turned into tuples, so nodes stay immutable."""

    def freeze(v: Any) -> Any:
        if isinstance(v, list):
            return tuple(freeze(x) for x in v)
        if isinstance(v, np.ndarray):
            return tuple(v.tolist())
        if isinstance(v, np.generic):
            return v.item()
        return v

    return MappingProxyType({k: freeze(v) for k, v in (attrs or {}).items()})


@dataclass(frozen=True)
class Value:
    name: str
    dtype: str
    shape: Shape

    @property
    def batched(self) -> bool:
        return len(self.shape) > 0 and self.shape[0] is None

    @property
    def features(self) -> tuple[int, ...]:
        """The shape of one sample: the axes after the batch axis."""
        return tuple(self.shape[1:]) if self.batched else tuple(self.shape)

    @property
    def feature_size(self) -> int:
        return int(np.prod(self.features, dtype=np.int64))


@dataclass(frozen=True)
class Activation:
    """An elementwise unary operator fused into a LINEAR node, with its attributes."""

    op: Op
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attrs", freeze_attrs(self.attrs))


@dataclass(frozen=True)
class Node:
    op: Op
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "attrs", freeze_attrs(self.attrs))

    @property
    def activation(self) -> Activation | None:
        return self.attrs.get("activation")

    def with_attrs(self, **changes: Any) -> "Node":
        return replace(self, attrs={**self.attrs, **changes})


@dataclass(frozen=True)
class Graph:
    name: str
    inputs: tuple[Value, ...]
    outputs: tuple[Value, ...]
    nodes: tuple[Node, ...]
    values: Mapping[str, Value]
    constants: Mapping[str, np.ndarray]
    opset: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))
        frozen = {}
        for name, array in self.constants.items():
            array = np.asarray(array)
            if array.flags.writeable:
                array = array.copy()
                array.setflags(write=False)
            frozen[name] = array
        object.__setattr__(self, "constants", MappingProxyType(frozen))

    def value(self, name: str) -> Value:
        return self.values[name]

    def is_constant(self, name: str) -> bool:
        return name in self.constants

    def producers(self) -> dict[str, Node]:
        return {out: node for node in self.nodes for out in node.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in node.inputs:
                users.setdefault(name, []).append(node)
        return users

    def replace(self, **changes: Any) -> "Graph":
        return replace(self, **changes)

    def with_nodes(self, nodes: Iterable[Node], constants: Mapping[str, np.ndarray] | None = None) -> "Graph":
        """A graph with new nodes (and constants), keeping only the values still referenced."""
        nodes = tuple(nodes)
        constants = dict(self.constants if constants is None else constants)
        used = {v.name for v in self.inputs} | {v.name for v in self.outputs}
        for node in nodes:
            used.update(node.inputs)
            used.update(node.outputs)
        constants = {k: v for k, v in constants.items() if k in used}
        values = {k: v for k, v in self.values.items() if k in used}
        for name, array in constants.items():
            values.setdefault(name, Value(name, "bool" if array.dtype == np.bool_ else "f32", tuple(array.shape)))
        return replace(self, nodes=nodes, constants=constants, values=values)

    def parameter_count(self) -> int:
        return int(sum(a.size for a in self.constants.values()))
