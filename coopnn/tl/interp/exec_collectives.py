"""Interpreting the collectives with numpy on strided views of the memrefs, in double precision (complex128,
int64 for integers), the result rounded to the output's element type: B := alpha op(A) + beta B and its family."""

from __future__ import annotations

import numpy as np

from coopnn.tl import ast
from coopnn.tl.interp.state import Machine, View, executes


def strided(m: Machine, i, view: View) -> np.ndarray:
    """The memref as a numpy view of its buffer (a collective's operands are uniform)."""
    if view.buffer is None:
        m.fail(i, "a collective's memref operand is not associated")
    offset = int(np.ravel(view.offset)[0])
    shape = tuple(int(np.ravel(s)[0]) for s in view.shape)
    strides = tuple(int(np.ravel(s)[0]) for s in view.strides)
    last = offset + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else offset
    if offset < 0 or last >= len(view.buffer):
        m.fail(i, f"the memref (shape {list(shape)}, strides {list(strides)}) reaches outside its memory")
    itemsize = view.buffer.itemsize
    return np.lib.stride_tricks.as_strided(view.buffer[offset:], shape, tuple(s * itemsize for s in strides))


def _wide(array: np.ndarray) -> np.ndarray:
    kind = array.dtype.kind
    return array.astype(np.complex128 if kind == "c" else np.int64 if kind in "iub" else np.float64)


def _scalar(value) -> np.generic:
    return _wide(np.asarray(value).reshape(-1)[:1])[0]


def _op(array: np.ndarray, transpose: str) -> np.ndarray:
    return array.T if transpose == "t" and array.ndim == 2 else array


def _update(out: np.ndarray, alpha, product: np.ndarray, beta) -> None:
    """out := alpha product + beta out (beta 0 ignores what out held, NaN included, as BLAS does)."""
    total = alpha * product + (beta * _wide(out) if beta != 0 else 0)
    with np.errstate(all="ignore"):
        out[...] = np.asarray(total).astype(out.dtype)


def _axpby(a, b, i):
    return _op(a, i.transposes[0])


def _cumsum(a, b, i):
    return np.cumsum(a, axis=i.mode)


def _gemm(a, b, c, i):
    return _op(a, i.transposes[0]) @ _op(b, i.transposes[1])


def _gemv(a, b, c, i):
    return _op(a, i.transposes[0]) @ b


def _ger(a, b, c, i):
    return np.outer(a, b)


def _hadamard(a, b, c, i):
    return a * b


def _sum(a, b, i):
    return _op(a, i.transposes[0]).sum(axis=1) if b.ndim == 1 else a.sum()


PRODUCTS = {"axpby": _axpby, "cumsum": _cumsum, "gemm": _gemm, "gemv": _gemv, "ger": _ger, "hadamard": _hadamard,
            "sum": _sum}


@executes(ast.Collective)
def _collective(m: Machine, i: ast.Collective):
    values = m.values(i.operands)
    alpha, beta = _scalar(values[0]), _scalar(values[-2])
    inputs = [_wide(strided(m, i, v)) for v in values[1:-2]]
    product = PRODUCTS[i.op](*inputs, strided(m, i, values[-1]), i)
    _update(strided(m, i, values[-1]), alpha, product, beta)
    return ()
