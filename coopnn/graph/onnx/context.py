"""ConversionContext: what converters read (shapes, constants) and the one way they build IR (`emit`).

Each ONNX value is either *static* (known at import time: initializers, Constant outputs, shape computations) or an
IR value computed from the model's inputs. `emit` checks an IR operator's shapes with `coopnn.graph.ops`; when all of
its operands are static it folds the operator right away (`static_eval`) instead of adding a node, so the graph
only holds nodes that depend on an input. Static arrays become IR constants (float32 or bool) when a node reads them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, NoReturn, Sequence

import numpy as np

from coopnn.errors import UnsupportedOperatorError
from coopnn.graph import ops
from coopnn.graph.ir import Node, Op, Value
from coopnn.graph.onnx.node import OnnxNode
from coopnn.graph.onnx.static_eval import StaticEvalError, evaluate_static, is_symbolic

Shape = tuple

# Constants built during import (folded results, ConstantOfShape, Expand's ones) are bounded: MLP weights are far
# smaller, and a hostile model must not make the importer allocate without limit.
MAX_CONSTANT_ELEMENTS = 1 << 26


class ConversionContext:
    """`supported`: the operators the importer converts, named by the errors of nodes it cannot."""

    def __init__(self, taken_names: Iterable[str], supported: Sequence[str]):
        self.supported = list(supported)
        self.static: dict[str, np.ndarray] = {}
        self.values: dict[str, Value] = {}
        self.constants: dict[str, np.ndarray] = {}
        self.nodes: list[Node] = []
        self._taken = set(taken_names)
        self._node_names: set[str] = set()
        self.node: OnnxNode | None = None  # the ONNX node being converted, named by errors

    # ----- declaring what exists before the first node ---------------------------------------------------------

    def add_input(self, value: Value) -> None:
        self.values[value.name] = value
        self._taken.add(value.name)

    def set_static(self, name: str, array: np.ndarray) -> None:
        self.static[name] = np.asarray(array)
        self._taken.add(name)

    def new_static(self, array: np.ndarray, hint: str) -> str:
        """A fresh name holding the constant `array` (operands converters add, such as a divisor)."""
        name = self._fresh(hint, self._taken)
        self.set_static(name, array)
        return name

    # ----- queries ---------------------------------------------------------------------------------------------

    def is_static(self, name: str) -> bool:
        return name in self.static

    def shape(self, name: str) -> Shape:
        """The IR shape of `name`: None at axis 0 when computed from inputs, the array's shape when static."""
        if name in self.static:
            return tuple(self.static[name].shape)
        return tuple(self.values[name].shape)

    def rank(self, name: str) -> int:
        return len(self.shape(name))

    def axis(self, axis: int, rank: int, role: str = "axis") -> int:
        """`axis` made non-negative for a tensor of `rank`; out of range is unsupported (`role` names the attribute)."""
        if not -rank <= axis < rank:
            self.fail(f"{role} {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis

    def static_value(self, name: str, role: str) -> np.ndarray:
        """The import-time value of `name`; a value computed at run time is unsupported (`role` says what it is)."""
        if name not in self.static:
            self.fail(f"its {role} ({name!r}) must be a constant, but it is computed at run time")
        return self.static[name]

    def dtype(self, name: str) -> str:
        """The IR element type of a value: "f32" or "bool" (integer constants read as "i64")."""
        if name in self.static:
            kind = self.static[name].dtype
            return "bool" if kind == np.bool_ else ("f32" if kind.kind == "f" else "i64")
        return self.values[name].dtype

    # ----- building --------------------------------------------------------------------------------------------

    def emit(self, op: Op, inputs: Sequence[str], attrs: Mapping[str, Any] | None = None,
             output: str | None = None) -> str:
        """Add `op` on `inputs` (folded when they are all static) and return the name of its result."""
        attrs = dict(attrs or {})
        shapes = [self.shape(n) for n in inputs]
        try:
            shape = ops.output_shape(op, shapes, attrs)
        except ops.ShapeError as e:
            self.fail(f"{op.value} on shapes {_fmt(shapes)}: {e}")
        name = output if output is not None else self._fresh(f"{self._onnx_node().name}/{op.value}", self._taken)
        if all(self.is_static(n) for n in inputs):
            self.check_constant_size(shape)
            try:
                self.set_static(name, evaluate_static(op, [self.static[n] for n in inputs], attrs))
            except StaticEvalError as e:
                self.fail(str(e))
            return name
        if not shape or shape[0] is not None or None in shape[1:]:
            self.fail(f"{op.value} on shapes {_fmt(shapes)} gives {_fmt([shape])}: the batch axis must stay first")
        for operand in inputs:
            self._materialize(operand)
        node_name = self._fresh(self._onnx_node().name, self._node_names)
        self.nodes.append(Node(op, node_name, tuple(inputs), (name,), attrs))
        self.values[name] = Value(name, ops.output_dtype(op, attrs), shape)
        self._taken.add(name)
        return name

    def check_constant_size(self, shape: Shape) -> None:
        """Refuse to build a constant larger than MAX_CONSTANT_ELEMENTS (a malformed model must not exhaust memory)."""
        if any(int(d) < 0 for d in shape):
            self.fail(f"it would build a constant of shape {list(shape)}, which has a negative dimension")
        count = 1
        for d in shape:
            count *= int(d)
        if count > MAX_CONSTANT_ELEMENTS:
            self.fail(f"it would build a constant of shape {list(shape)}, more than {MAX_CONSTANT_ELEMENTS} elements")

    def fail(self, detail: str) -> NoReturn:
        """Raise UnsupportedOperatorError for the node being converted, with `detail` saying what is not supported."""
        node = self._onnx_node()
        raise UnsupportedOperatorError(node.op_type, node.name, node.opset, self.supported, detail)

    # ----- internals -------------------------------------------------------------------------------------------

    def _materialize(self, name: str) -> None:
        if name not in self.static or name in self.constants:
            return
        array = self.static[name]
        if is_symbolic(array):
            self.fail(f"{name!r} depends on the batch size, which coopnn only knows at run time")
        array = array if array.dtype == np.bool_ else array.astype(np.float32)
        self.constants[name] = array
        self.values[name] = Value(name, "bool" if array.dtype == np.bool_ else "f32", tuple(array.shape))

    def _onnx_node(self) -> OnnxNode:
        assert self.node is not None, "converters run with the node they convert set on the context"
        return self.node

    @staticmethod
    def _fresh(base: str, taken: set[str]) -> str:
        name, k = base, 1
        while name in taken:
            name = f"{base}_{k}"
            k += 1
        taken.add(name)
        return name


def _fmt(shapes: Sequence[Shape]) -> str:
    return ", ".join("[" + ", ".join("batch" if d is None else str(d) for d in s) + "]" for s in shapes)
