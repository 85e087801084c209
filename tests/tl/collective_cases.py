"""Kernels that run one collective, with their arguments and the numpy result, over shapes, transposes, strides
(views into larger arrays), dynamic sizes and element types; shared by the interpreter's and the compiled kernels'
tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coopnn.tl.types import ScalarType


@dataclass(frozen=True)
class Case:
    name: str
    text: str
    args: tuple
    expected: np.ndarray
    dtype: str

    @property
    def output(self) -> np.ndarray:
        return self.args[-1]


def _memref(dtype: str, shape, dynamic: bool, strided: bool) -> str:
    dims = "".join("x?" if dynamic else f"x{n}" for n in shape)
    layout = ",strided<" + ",".join(["1"] + ["?"] * (len(shape) - 1)) + ">" if strided and shape else ""
    return f"memref<{dtype}{dims}{layout}>"


def _array(rng, dtype: str, shape, strided: bool) -> np.ndarray:
    numpy_type = ScalarType(dtype).numpy
    padded = tuple(n + 3 if strided and k == 0 else n for k, n in enumerate(shape))
    if numpy_type.kind in "iu":
        values = rng.integers(-4, 5, padded)
    elif numpy_type.kind == "c":
        values = rng.standard_normal(padded) + 1j * rng.standard_normal(padded)
    else:
        values = rng.standard_normal(padded)
    array = np.array(values, dtype=numpy_type, order="F")
    return array[tuple(slice(0, n) for n in shape)] if strided else array


def _scalars(dtype: str):
    return (2, 1) if ScalarType(dtype).is_integer else (1.5, 0.5)


def _wide(a):
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.int64 if a.dtype.kind in "iu" else np.float64)


def _t(a, flag):
    return a.T if flag == "t" and a.ndim == 2 else a


def _kernel(op: str, operands: list[tuple[str, str]], dtype: str, atomic: bool, mode: int | None) -> str:
    """`operands`: (name, type) of the memrefs; alpha and beta are arguments (beta a constant when atomic)."""
    memrefs = ", ".join(f"%{n}: {t}" for n, t in operands)
    beta = f"%beta_c = constant {1 if ScalarType(dtype).is_integer else '1.0'} : {dtype}\n    " if atomic else ""
    names = [f"%{n}" for n, _ in operands]
    beta_name = "%beta_c" if atomic else "%beta"
    before = names[:-1] if mode is None else [names[0], str(mode)]
    listed = ", ".join(["%alpha", *before, beta_name, names[-1]])
    return (f"func @k(%alpha: {dtype}, %beta: {dtype}, {memrefs}) {{\n    {beta}{op} {listed}\n}}\n")


def _case(rng, op, flags, shapes, dtype, dynamic, strided, atomic=False, mode=None) -> Case:
    arrays = [_array(rng, dtype, s, strided) for s in shapes]
    names = "abc"[:len(shapes)]
    operands = [(n, _memref(dtype, s, dynamic, strided)) for n, s in zip(names, shapes)]
    name = op + (".atomic" if atomic else "") + "".join(f".{f}" for f in flags)
    text = _kernel(name, operands, dtype, atomic, mode)
    alpha, beta = _scalars(dtype)
    beta = 1 if atomic else beta
    wide = [_wide(a) for a in arrays]
    product = PRODUCTS[op](*wide, flags, mode)
    expected = (alpha * product + beta * wide[-1]).astype(arrays[-1].dtype)
    label = f"{name}-{dtype}-{'x'.join(map(str, shapes[0]))}-{'dyn' if dynamic else 'static'}" \
            f"{'-strided' if strided else ''}"
    return Case(label, text, (np.asarray(alpha).astype(ScalarType(dtype).numpy),
                              np.asarray(beta).astype(ScalarType(dtype).numpy), *arrays), expected, dtype)


PRODUCTS = {
    "axpby": lambda a, b, f, m: _t(a, f[0]),
    "cumsum": lambda a, b, f, m: np.cumsum(a, axis=m),
    "gemm": lambda a, b, c, f, m: _t(a, f[0]) @ _t(b, f[1]),
    "gemv": lambda a, b, c, f, m: _t(a, f[0]) @ b,
    "ger": lambda a, b, c, f, m: np.outer(a, b),
    "hadamard": lambda a, b, c, f, m: a * b,
    "sum": lambda a, b, f, m: _t(a, f[0]).sum(axis=1) if b.ndim == 1 else a.sum(),
}


def cases(dtypes=("f32", "f64", "f16", "c32", "i32"), seed: int = 0) -> list[Case]:
    rng = np.random.default_rng(seed)
    found = []
    for dtype in dtypes:
        for dynamic, strided in ((False, False), (True, False), (True, True)):
            for flags, (m, n, k) in ((("n", "n"), (5, 3, 4)), (("t", "n"), (8, 8, 8)), (("n", "t"), (3, 7, 2)),
                                     (("t", "t"), (1, 9, 5))):
                a = (m, k) if flags[0] == "n" else (k, m)
                b = (k, n) if flags[1] == "n" else (n, k)
                found.append(_case(rng, "gemm", flags, [a, b, (m, n)], dtype, dynamic, strided))
            found.append(_case(rng, "gemv", ("n",), [(6, 4), (4,), (6,)], dtype, dynamic, strided))
            found.append(_case(rng, "gemv", ("t",), [(6, 4), (6,), (4,)], dtype, dynamic, strided))
            found.append(_case(rng, "ger", (), [(5,), (3,), (5, 3)], dtype, dynamic, strided))
            found.append(_case(rng, "hadamard", (), [(4, 6), (4, 6), (4, 6)], dtype, dynamic, strided))
            found.append(_case(rng, "hadamard", (), [(7,), (7,), (7,)], dtype, dynamic, strided))
            found.append(_case(rng, "axpby", ("t",), [(3, 5), (5, 3)], dtype, dynamic, strided))
            found.append(_case(rng, "axpby", ("n",), [(9,), (9,)], dtype, dynamic, strided))
            found.append(_case(rng, "sum", ("n",), [(4, 6), (4,)], dtype, dynamic, strided))
            found.append(_case(rng, "sum", ("t",), [(4, 6), (6,)], dtype, dynamic, strided))
            found.append(_case(rng, "cumsum", (), [(5, 4), (5, 4)], dtype, dynamic, strided, mode=1))
            found.append(_case(rng, "cumsum", (), [(11,), (11,)], dtype, dynamic, strided, mode=0))
        found.append(_case(rng, "axpby", ("n",), [(), ()], dtype, False, False))
        found.append(_case(rng, "sum", ("n",), [(6,), ()], dtype, False, False))
        found.append(_case(rng, "gemm", ("n", "n"), [(4, 3), (3, 2), (4, 2)], dtype, True, False, atomic=True))
    return found


def tolerance(dtype: str) -> dict:
    if dtype in ("f16", "bf16"):
        return {"rtol": 1e-3 if dtype == "f16" else 1e-2, "atol": 2.5e-3 if dtype == "f16" else 2e-2}
    if dtype in ("f32", "c32"):
        return {"rtol": 1e-4, "atol": 1e-5}
    return {"rtol": 1e-12, "atol": 1e-12}
