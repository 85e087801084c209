"""Import-time evaluation of constants: float constants fold through `coopnn.graph.ops`, integer shape tensors fold
here, with a symbolic element for the batch size.

Exporters compute Reshape and Expand targets from `Shape` at run time. The IR has no integer tensors, so those
computations run during import: a shape tensor is a numpy array of Python ints and `BatchDim`s (object dtype while it
holds a `BatchDim`, int64 otherwise).
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from coopnn import dtypes
from coopnn.graph import ops
from coopnn.graph.ir import Op


class StaticEvalError(ValueError):
    """A constant computation coopnn cannot do at import time; the importer reports it against the node."""


class BatchDim:
    """`factor` times the batch size, which is only known at run time."""

    __slots__ = ("factor",)

    def __init__(self, factor: int = 1):
        self.factor = int(factor)

    def __mul__(self, other: Any) -> "BatchDim":
        if isinstance(other, BatchDim):
            raise StaticEvalError("the shape computation multiplies the batch size by itself")
        return BatchDim(self.factor * int(other))

    __rmul__ = __mul__

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, BatchDim) and other.factor == self.factor

    def __hash__(self) -> int:
        return hash(("batch", self.factor))

    def __repr__(self) -> str:
        return "batch" if self.factor == 1 else f"{self.factor}*batch"

    def _arithmetic(self, *_: Any) -> "BatchDim":
        raise StaticEvalError("the shape computation does arithmetic on the batch size beyond scaling it")

    __add__ = __radd__ = __sub__ = __rsub__ = __neg__ = __abs__ = _arithmetic
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = _arithmetic
    __lt__ = __le__ = __gt__ = __ge__ = _arithmetic


BATCH = BatchDim(1)


def is_symbolic(array: np.ndarray) -> bool:
    """Whether `array` holds the batch size somewhere (and so cannot become an IR constant)."""
    return array.dtype == object and any(isinstance(x, BatchDim) for x in array.flat)


def shape_tensor(dims: Sequence[Any]) -> np.ndarray:
    """A 1-D shape tensor from dims where None (the batch axis) becomes BATCH."""
    return normalize([BATCH if d is None else d for d in dims])


def normalize(values: Any) -> np.ndarray:
    """int64 when every element is a plain integer, object dtype while a BatchDim is present."""
    array = np.asarray(values, dtype=object)
    if any(isinstance(x, BatchDim) for x in array.flat):
        return array
    if array.size and all(isinstance(x, (bool, np.bool_)) for x in array.flat):
        return array.astype(np.bool_)
    return array.astype(np.int64)


def exact_div(a: Any, b: Any) -> Any:
    """a / b for ints and BatchDims when it divides exactly (element counts in a reshape)."""
    if isinstance(b, BatchDim):
        if not isinstance(a, BatchDim) or a.factor % b.factor:
            raise StaticEvalError(f"{a} elements cannot be split into groups of {b}")
        return a.factor // b.factor
    if b == 0:
        raise StaticEvalError(f"cannot divide {a} elements into groups of size 0")
    if isinstance(a, BatchDim):
        if a.factor % int(b):
            raise StaticEvalError(f"{a} elements cannot be split into groups of {b}")
        return BatchDim(a.factor // int(b))
    if a % b:
        raise StaticEvalError(f"{a} elements cannot be split into groups of {b}")
    return a // b


def product(dims: Sequence[Any]) -> Any:
    result: Any = 1
    for d in dims:
        result = d * result if isinstance(d, BatchDim) else result * d
    return result


def _trunc_div(a: Any, b: Any) -> int:
    # ONNX integer Div rounds toward zero, like C, not toward minus infinity like Python's //
    if isinstance(a, BatchDim) or isinstance(b, BatchDim):
        return exact_div(a, b)
    if b == 0:
        raise StaticEvalError("integer division by zero in a shape computation")
    q = abs(int(a)) // abs(int(b))
    return q if (a < 0) == (b < 0) else -q


def _elementwise(fn: Callable[..., Any]) -> Callable[..., np.ndarray]:
    ufunc = np.frompyfunc(fn, 2, 1)

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return normalize(ufunc(a.astype(object), b.astype(object)))

    return run


_INTEGER_EVAL: dict[Op, Callable[..., np.ndarray]] = {
    Op.ADD: _elementwise(operator.add),
    Op.SUB: _elementwise(operator.sub),
    Op.MUL: _elementwise(operator.mul),
    Op.DIV: _elementwise(_trunc_div),
    Op.MAX: _elementwise(max),
    Op.MIN: _elementwise(min),
    Op.EQUAL: _elementwise(operator.eq),
    Op.LESS: _elementwise(operator.lt),
    Op.LESS_EQUAL: _elementwise(operator.le),
    Op.GREATER: _elementwise(operator.gt),
    Op.GREATER_EQUAL: _elementwise(operator.ge),
    Op.NEG: lambda a: normalize(np.frompyfunc(operator.neg, 1, 1)(a.astype(object))),
    Op.ABS: lambda a: normalize(np.frompyfunc(abs, 1, 1)(a.astype(object))),
    Op.WHERE: lambda c, a, b: normalize(np.where(c, a.astype(object), b.astype(object))),
}

# Operators that only move elements: their float semantics in `ops` hold for any element type.
_MOVING = (Op.IDENTITY, Op.CONCAT, Op.SLICE, Op.RESHAPE, Op.TRANSPOSE)


def _is_float(array: np.ndarray) -> bool:
    return array.dtype.kind == "f"


def evaluate_static(op: Op, arrays: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """`op` on constants: float32 semantics when any operand is a float (or all are bool), integer semantics else."""
    if any(_is_float(a) for a in arrays) or all(a.dtype == np.bool_ for a in arrays):
        if any(is_symbolic(a) for a in arrays):
            raise StaticEvalError(f"{op.value} mixes the batch size into float values")
        return ops.evaluate(op, [a if a.dtype == np.bool_ else a.astype(np.float32) for a in arrays], attrs)
    if op in _MOVING:
        return normalize(ops.evaluate(op, [a.astype(object) for a in arrays], attrs))
    if op not in _INTEGER_EVAL:
        raise StaticEvalError(f"{op.value} on integer tensors cannot be evaluated at import time")
    return _INTEGER_EVAL[op](*arrays)


def cast_static(array: np.ndarray, to: str) -> np.ndarray:
    """Cast a constant to "f32", "f16" or "bf16" (rounded, kept as float32), "bool" or "i64" (toward zero)."""
    if to == "i64":
        if _is_float(array):
            return np.trunc(array).astype(np.int64)
        return normalize(array)
    if is_symbolic(array):
        raise StaticEvalError(f"cannot cast a shape that holds the batch size to {to}")
    if to == "bool":
        return array.astype(np.bool_)
    return array.astype(dtypes.dtype(to).numpy).astype(np.float32)
