"""What each IR operator means: its arity, attributes, output shape rule and float32 numpy semantics.

This table is the single definition of the operators. Shape inference, constant folding and the numpy backend all
read it, and the GPU targets are tested against its numpy semantics. The activations' semantics come from their own
table, `coopnn.graph.activations`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from coopnn.graph.activations import ACTIVATIONS, f32 as _f32
from coopnn.graph.encodings.base import Encoding
from coopnn.graph.ir import Activation, Op

Array = np.ndarray
ShapeT = tuple


class ShapeError(ValueError):
    """Input shapes an operator cannot combine; the importer and the verifier turn it into a typed error."""


@dataclass(frozen=True)
class OpDef:
    op: Op
    kind: str  # "unary", "binary", "ternary", "linear", "shape", "norm", "reduce", "encoding"
    min_inputs: int
    max_inputs: int
    shape_fn: Callable[[Sequence[ShapeT], Mapping[str, Any]], ShapeT]
    eval_fn: Callable[..., Array]
    bool_out: bool = False

    @property
    def fusable_activation(self) -> bool:
        """Whether the op can ride on a LINEAR node as its activation (one of `coopnn.graph.activations`)."""
        return self.op in ACTIVATIONS


REGISTRY: dict[Op, OpDef] = {}


def _register(op: Op, kind: str, n_in: tuple[int, int], shape_fn, eval_fn, bool_out: bool = False) -> None:
    REGISTRY[op] = OpDef(op, kind, n_in[0], n_in[1], shape_fn, eval_fn, bool_out)


def opdef(op: Op) -> OpDef:
    return REGISTRY[op]


def forward_defaults(op: Op) -> dict[str, Any]:
    """The attribute defaults of `op`'s forward function: the one place they are written, so that derivative rules
    and kernel expansions read them rather than repeat them."""
    parameters = list(inspect.signature(opdef(op).eval_fn).parameters.values())[1:]
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


# ----- shape rules -----------------------------------------------------------------------------------------------


def broadcast_shapes(*shapes: ShapeT) -> ShapeT:
    """numpy broadcasting where None is the batch: it broadcasts with 1 and with itself only."""
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        dims = [s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0]
        if any(d is None for d in dims):
            if any(d not in (None, 1) for d in dims):
                raise ShapeError(f"cannot broadcast the batch axis against a fixed size in {list(shapes)}")
            out.append(None)
            continue
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise ShapeError(f"shapes {list(shapes)} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _same(shapes, attrs):
    return tuple(shapes[0])


def _broadcast(shapes, attrs):
    return broadcast_shapes(*shapes)


def _axis(attrs, rank: int) -> int:
    axis = attrs["axis"]
    return axis + rank if axis < 0 else axis


def _linear_shape(shapes, attrs):
    x, w = shapes[0], shapes[1]
    if len(w) != 2 or x[-1] != w[1]:
        raise ShapeError(f"linear weight {w} does not fit input {x}")
    if len(shapes) > 2 and tuple(shapes[2]) not in ((w[0],), (1, w[0])):
        raise ShapeError(f"linear bias {shapes[2]} does not fit {w[0]} outputs")
    return tuple(x[:-1]) + (w[0],)


def _matmul_shape(shapes, attrs):
    a, b = shapes
    if len(b) != 2 or len(a) < 1 or a[-1] != b[0]:
        raise ShapeError(f"matmul of {a} and {b} is not supported (the right side must be a [k, m] matrix)")
    return tuple(a[:-1]) + (b[1],)


def _gemm_shape(shapes, attrs):
    a, b = shapes[0], shapes[1]
    if len(a) != 2 or len(b) != 2:
        raise ShapeError(f"gemm needs 2-D operands, got {a} and {b}")
    m, k = (a[1], a[0]) if attrs.get("trans_a") else (a[0], a[1])
    kb, n = (b[1], b[0]) if attrs.get("trans_b") else (b[0], b[1])
    if k != kb:
        raise ShapeError(f"gemm inner sizes differ: {a} and {b}")
    out = (m, n)
    if len(shapes) > 2:
        broadcast_shapes(out, shapes[2])
    return out


def _concat_shape(shapes, attrs):
    rank = len(shapes[0])
    axis = _axis(attrs, rank)
    if axis == 0 and any(s and s[0] is None for s in shapes):
        raise ShapeError("concat along the batch axis is not supported")
    total = 0
    for s in shapes:
        if len(s) != rank or any(d != e for i, (d, e) in enumerate(zip(s, shapes[0])) if i != axis):
            raise ShapeError(f"concat of {list(shapes)} along axis {axis}")
        total += s[axis]
    return tuple(shapes[0][:axis]) + (total,) + tuple(shapes[0][axis + 1 :])


def _slice_shape(shapes, attrs):
    shape = shapes[0]
    axis = attrs["axis"]
    if shape[axis] is None:
        raise ShapeError("slicing the batch axis is not supported")
    n = len(range(attrs["start"], attrs["stop"], attrs["step"]))
    return tuple(shape[:axis]) + (n,) + tuple(shape[axis + 1 :])


def _reshape_shape(shapes, attrs):
    src, dst = shapes[0], tuple(attrs["shape"])
    src_batched = bool(src) and src[0] is None
    dst_batched = bool(dst) and dst[0] is None
    if src_batched != dst_batched or any(d is None for d in dst[1:]):
        raise ShapeError(f"reshape from {src} to {dst} must keep the batch axis first")
    if int(np.prod([d for d in src if d is not None])) != int(np.prod([d for d in dst if d is not None])):
        raise ShapeError(f"reshape from {src} to {dst} changes the number of elements")
    return dst


def _transpose_shape(shapes, attrs):
    shape, perm = shapes[0], tuple(attrs["perm"])
    if sorted(perm) != list(range(len(shape))):
        raise ShapeError(f"transpose perm {perm} does not fit rank {len(shape)}")
    if shape and shape[0] is None and perm[0] != 0:
        raise ShapeError("transpose may not move the batch axis")
    return tuple(shape[p] for p in perm)


def _layer_norm_shape(shapes, attrs):
    x = shapes[0]
    axis = _axis(attrs, len(x))
    if axis == 0 and x[0] is None:
        raise ShapeError("layer normalisation over the batch axis is not supported")
    for s in shapes[1:]:
        broadcast_shapes(tuple(x[axis:]), s)
    return tuple(x)


def _softmax_shape(shapes, attrs):
    x = shapes[0]
    if x[_axis(attrs, len(x))] is None:
        raise ShapeError("softmax over the batch axis is not supported")
    return tuple(x)


def _reduce_shape(shapes, attrs):
    x = shapes[0]
    axes = tuple(a + len(x) if a < 0 else a for a in attrs["axes"])
    if any(x[a] is None for a in axes):
        raise ShapeError("reducing over the batch axis is not supported")
    if attrs.get("keepdims", True):
        return tuple(1 if i in axes else d for i, d in enumerate(x))
    return tuple(d for i, d in enumerate(x) if i not in axes)


# ----- semantics -------------------------------------------------------------------------------------------------


def _exact_rows_matmul(a, b):
    """a @ b accumulated in float64: BLAS float32 kernels sum a row differently depending on its place in the
    register tile (OpenBLAS on AVX-512), so identical samples could get different results; float32 products are exact
    in float64 and its rounding errors almost never survive the final rounding to float32."""
    return np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))


def _matmul_eval(a, b):
    return _f32(_exact_rows_matmul(a, b))


def _linear_eval(x, w, b=None, activation: Activation | None = None):
    y = _exact_rows_matmul(x, w.T)
    if b is not None:
        y = y + b.reshape(-1)
    y = _f32(y)
    if activation is not None:
        y = evaluate(activation.op, [y], activation.attrs)
    return y


def _gemm_eval(a, b, c=None, alpha=1.0, beta=1.0, trans_a=0, trans_b=0):
    a = a.T if trans_a else a
    b = b.T if trans_b else b
    y = np.float32(alpha) * np.matmul(a, b)
    if c is not None:
        y = y + np.float32(beta) * c
    return _f32(y)


def _slice_eval(x, axis, start, stop, step):
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, stop if stop >= 0 else None, step)
    return x[tuple(index)]


def _reshape_eval(x, shape):
    return x.reshape((x.shape[0],) + tuple(shape[1:]) if shape and shape[0] is None else tuple(shape))


def _softmax_eval(x, axis, log=False):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    s = np.sum(e, axis=axis, keepdims=True)
    return _f32(shifted - np.log(s)) if log else _f32(e / s)


def _layer_norm_eval(x, scale, bias=None, axis=-1, epsilon=1e-5):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean(np.square(x - mean), axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + np.float32(epsilon)) * scale
    if bias is not None:
        y = y + bias
    return _f32(y)


def _reduce(fn):
    def run(x, axes, keepdims=True):
        return _f32(fn(x, axis=tuple(axes), keepdims=bool(keepdims)))

    return run


def _encoding_shape(shapes, attrs):
    encoding, x = attrs.get("encoding"), shapes[0]
    if not isinstance(encoding, Encoding):
        raise ShapeError(f"an encoding node holds a coopnn.graph.encodings Encoding, not {encoding!r}")
    if len(x) != 2 or x[-1] != encoding.n_input_dims:
        raise ShapeError(f"{encoding.describe()} encodes [batch, {encoding.n_input_dims}] inputs, not {x}")
    want = ((encoding.n_parameters,),) if encoding.n_parameters else ()
    if tuple(tuple(s) for s in shapes[1:]) != want:
        raise ShapeError(f"{encoding.describe()} takes {encoding.n_parameters} parameters as a vector "
                         f"{list(want)}, not {list(shapes[1:])}")
    return (x[0], encoding.n_output_dims)


def _encoding_eval(x, params=None, encoding=None):
    return encoding.forward(x, np.zeros(0, np.float32) if params is None else params)


def _cast_eval(x, to):
    return x.astype(np.bool_) if to == "bool" else _f32(x)


_BINARY: dict[Op, Callable[[Array, Array], Array]] = {
    Op.ADD: lambda a, b: _f32(a + b),
    Op.SUB: lambda a, b: _f32(a - b),
    Op.MUL: lambda a, b: _f32(a * b),
    Op.DIV: lambda a, b: _f32(a / b),
    Op.POW: lambda a, b: _f32(np.power(a, b)),
    Op.MAX: lambda a, b: _f32(np.maximum(a, b)),
    Op.MIN: lambda a, b: _f32(np.minimum(a, b)),
    Op.PRELU: lambda x, slope: _f32(np.where(x >= 0, x, x * slope)),
}

_COMPARE: dict[Op, Callable[[Array, Array], Array]] = {
    Op.LESS: np.less,
    Op.LESS_EQUAL: np.less_equal,
    Op.GREATER: np.greater,
    Op.GREATER_EQUAL: np.greater_equal,
    Op.EQUAL: np.equal,
    Op.AND: np.logical_and,
    Op.OR: np.logical_or,
    Op.XOR: np.logical_xor,
}

for _op, _activation in ACTIVATIONS.items():
    _register(_op, "unary", (1, 1), _same, _activation.forward)
_register(Op.IDENTITY, "unary", (1, 1), _same, lambda x: x)
_register(Op.NOT, "unary", (1, 1), _same, np.logical_not, bool_out=True)
for _op, _fn in _BINARY.items():
    _register(_op, "binary", (2, 2), _broadcast, _fn)
for _op, _fn in _COMPARE.items():
    _register(_op, "binary", (2, 2), _broadcast, _fn, bool_out=True)
_register(Op.WHERE, "ternary", (3, 3), _broadcast, lambda c, a, b: _f32(np.where(c, a, b)))
_register(Op.LINEAR, "linear", (2, 3), _linear_shape, _linear_eval)
_register(Op.MATMUL, "linear", (2, 2), _matmul_shape, _matmul_eval)
_register(Op.GEMM, "linear", (2, 3), _gemm_shape, _gemm_eval)
_register(Op.CAST, "unary", (1, 1), _same, _cast_eval)
_register(Op.CONCAT, "shape", (1, 1 << 16), _concat_shape, lambda *xs, axis: np.concatenate(xs, axis=axis))
_register(Op.SLICE, "shape", (1, 1), _slice_shape, _slice_eval)
_register(Op.RESHAPE, "shape", (1, 1), _reshape_shape, _reshape_eval)
_register(Op.TRANSPOSE, "shape", (1, 1), _transpose_shape, lambda x, perm: np.transpose(x, perm))
_register(Op.SOFTMAX, "norm", (1, 1), _softmax_shape, lambda x, axis: _softmax_eval(x, axis))
_register(Op.LOG_SOFTMAX, "norm", (1, 1), _softmax_shape, lambda x, axis: _softmax_eval(x, axis, log=True))
_register(Op.LAYER_NORM, "norm", (2, 3), _layer_norm_shape, _layer_norm_eval)
_register(Op.REDUCE_SUM, "reduce", (1, 1), _reduce_shape, _reduce(np.sum))
_register(Op.REDUCE_MEAN, "reduce", (1, 1), _reduce_shape, _reduce(np.mean))
_register(Op.REDUCE_MAX, "reduce", (1, 1), _reduce_shape, _reduce(np.max))
_register(Op.REDUCE_MIN, "reduce", (1, 1), _reduce_shape, _reduce(np.min))
_register(Op.ENCODING, "encoding", (1, 2), _encoding_shape, _encoding_eval)

assert set(REGISTRY) == set(Op), f"operators without a definition: {set(Op) - set(REGISTRY)}"


def output_shape(op: Op, shapes: Sequence[ShapeT], attrs: Mapping[str, Any]) -> ShapeT:
    """The output shape of `op` on inputs of `shapes`; raises ShapeError when they do not combine."""
    d = REGISTRY[op]
    if not d.min_inputs <= len(shapes) <= d.max_inputs:
        raise ShapeError(f"{op.value} takes {d.min_inputs}..{d.max_inputs} inputs, got {len(shapes)}")
    return tuple(d.shape_fn([tuple(s) for s in shapes], attrs))


def output_dtype(op: Op, attrs: Mapping[str, Any]) -> str:
    if op is Op.CAST:
        return attrs["to"]
    return "bool" if REGISTRY[op].bool_out else "f32"


def evaluate(op: Op, inputs: Sequence[Array], attrs: Mapping[str, Any]) -> Array:
    """float32 numpy semantics of `op`: the reference every backend is measured against."""
    with np.errstate(all="ignore"):  # NaN and inf propagate as IEEE says; they are data, not errors
        return REGISTRY[op].eval_fn(*inputs, **attrs)
