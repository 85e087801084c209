"""Lowerings of the coopvec target's arithmetic, elementwise and reduction instructions (registered in the
target's `LOWERINGS` when the package is imported, as `accumulate.py`'s are).

Whole-vector instructions are used where the extension allows them on cooperative vectors (arithmetic, FMax, FMin,
FClamp, Exp, Log, Tanh, Step); the rest (Sin, Cos, Sqrt, Floor, Ceil, FSign, Pow, comparisons, selects, gathers,
reductions) go component by component. Instructions whose result is exact in float16 when their operands are (max,
min, neg, abs, comparisons, selects, gathers) stay in float16 (`CoopvecEmitter.exact_dtype`).
"""

from __future__ import annotations

import numpy as np

from coopnn.backends.coopvec.target import CoopvecEmitter, lowers
from coopnn.backends.coopvec.values import Held
from coopnn.shaders.kernel.program import Instr
from coopnn.shaders.targets.scalar_math import ARITHMETIC, COMPARISONS, GLSL_UNARY, LOGICAL, TANH_LIMIT, numpy_pow

# GLSL.std.450 instructions (`GLSL_UNARY`) allowed on whole cooperative vectors; the others go component by component
_VECTOR_GLSL = ("exp", "log")
_SCALAR_GLSL = ("sin", "cos", "sqrt", "floor", "ceil", "sign")
_EXACT_MINMAX = {"max": "FMax", "min": "FMin"}


@lowers(*ARITHMETIC)
def arithmetic(e: CoopvecEmitter, instr: Instr) -> Held:
    a, b = (e.forms.vector(h, "f32") for h in e.operands(instr))
    vector_type = e.forms.vector_type("f32", instr.type.size)
    return e.vector_result(instr, "f32", ARITHMETIC[instr.op](e.fn.ops, vector_type, a, b))


@lowers(*_VECTOR_GLSL)
def vector_glsl(e: CoopvecEmitter, instr: Instr) -> Held:
    x = e.forms.vector(e.held[instr.args[0]], "f32")
    vector_type = e.forms.vector_type("f32", instr.type.size)
    return e.vector_result(instr, "f32", e.glsl(vector_type, GLSL_UNARY[instr.op], x))


@lowers("tanh")
def tanh(e: CoopvecEmitter, instr: Instr) -> Held:
    x = e.forms.vector(e.held[instr.args[0]], "f32")
    vector_type = e.forms.vector_type("f32", instr.type.size)
    limit = e.forms.known(np.full(instr.type.size, TANH_LIMIT))
    clamped = e.glsl(vector_type, "FClamp", x, e.forms.vector(e.forms.known(-limit.constant), "f32"),
                     e.forms.vector(limit, "f32"))
    return e.vector_result(instr, "f32", e.glsl(vector_type, "Tanh", clamped))


@lowers(*_EXACT_MINMAX)
def minmax(e: CoopvecEmitter, instr: Instr) -> Held:
    held = e.operands(instr)
    dtype = e.exact_dtype(held)
    vectors = [e.forms.vector(h, dtype) for h in held]
    result = e.glsl(e.forms.vector_type(dtype, instr.type.size), _EXACT_MINMAX[instr.op], *vectors)
    return e.vector_result(instr, dtype, result)


@lowers("neg")
def neg(e: CoopvecEmitter, instr: Instr) -> Held:
    x = e.held[instr.args[0]]
    vector_type = e.forms.vector_type(x.dtype, x.size)
    return e.vector_result(instr, x.dtype, e.fn.ops.float_negate(vector_type, e.forms.vector(x, x.dtype)))


@lowers("positive")
def positive(e: CoopvecEmitter, instr: Instr) -> Held:
    """1 - Step(x, 0) on the whole vector (Step(edge, v) is 0 where v < edge, else 1), exact in float16; on NaN
    it follows the driver's Step."""
    x = e.held[instr.args[0]]
    vector_type = e.forms.vector_type(x.dtype, x.size)
    zeros, ones = (e.forms.vector(e.forms.known(np.full(x.size, v)), x.dtype) for v in (0.0, 1.0))
    step = e.glsl(vector_type, "Step", e.forms.vector(x, x.dtype), zeros)
    return e.vector_result(instr, x.dtype, e.fn.ops.float_sub(vector_type, ones, step))


@lowers("abs")
def absolute(e: CoopvecEmitter, instr: Instr) -> Held:
    # FAbs is not among the instructions allowed on cooperative vectors; max(x, -x) is, and is exact.
    x = e.held[instr.args[0]]
    vector_type = e.forms.vector_type(x.dtype, x.size)
    v = e.forms.vector(x, x.dtype)
    return e.vector_result(instr, x.dtype,
                           e.glsl(vector_type, "FMax", v, e.fn.ops.float_negate(vector_type, v)))


@lowers(*_SCALAR_GLSL)
def scalar_glsl(e: CoopvecEmitter, instr: Instr) -> Held:
    return e.per_component("f32", "f32", e.operands(instr),
                           lambda x: e.glsl(e.f32, GLSL_UNARY[instr.op], x))


@lowers("pow")
def power(e: CoopvecEmitter, instr: Instr) -> Held:
    return e.per_component("f32", "f32", e.operands(instr), lambda a, b: _scalar_pow(e, a, b))


def _scalar_pow(e: CoopvecEmitter, a, b):
    return numpy_pow(e.fn, e.f32, e.boolean, lambda name, *args: e.glsl(e.f32, name, *args),
                     lambda x: e.forms.constant("f32", x), a, b)


@lowers(*COMPARISONS)
def compare(e: CoopvecEmitter, instr: Instr) -> Held:
    held = e.operands(instr)
    return e.per_component(e.exact_dtype(held), "bool", held,
                           lambda a, b: COMPARISONS[instr.op](e.fn.ops, e.boolean, a, b))


@lowers("not", *LOGICAL)
def logical(e: CoopvecEmitter, instr: Instr) -> Held:
    if instr.op == "not":
        return e.per_component("bool", "bool", e.operands(instr),
                               lambda x: e.fn.ops.logical_not(e.boolean, x))
    return e.per_component("bool", "bool", e.operands(instr),
                           lambda a, b: LOGICAL[instr.op](e.fn.ops, e.boolean, a, b))


@lowers("select")
def select(e: CoopvecEmitter, instr: Instr) -> Held:
    cond, a, b = e.operands(instr)
    dtype = "bool" if instr.type.dtype == "bool" else e.exact_dtype([a, b])
    conditions = e.forms.components(cond, "bool")
    choices = zip(conditions, e.forms.components(a, dtype), e.forms.components(b, dtype))
    return e.forms.from_scalars(dtype, [e.fn.ops.select(e.forms.scalar_types[dtype], c, x, y)
                                        for c, x, y in choices])


@lowers("gather")
def gather(e: CoopvecEmitter, instr: Instr) -> Held:
    sources = e.operands(instr)
    dtype = "bool" if instr.type.dtype == "bool" else e.exact_dtype(sources)
    if all(s.constant is not None for s in sources):
        return e.forms.known(np.array([sources[s].constant[c] for s, c in instr.attrs["index"]]), dtype)
    return e.forms.from_scalars(dtype, [e.forms.components(sources[s], dtype)[c]
                                        for s, c in instr.attrs["index"]])


@lowers("cast")
def cast(e: CoopvecEmitter, instr: Instr) -> Held:
    x = e.held[instr.args[0]]
    if instr.type.dtype == "bool":
        zero = e.forms.constant("f32", 0.0)
        # numpy's bool(x): NaN is true, hence unordered
        return e.per_component("f32", "bool", [x],
                               lambda v: e.fn.ops.float_not_equal(e.boolean, v, zero))
    one, zero = e.forms.constant("f16", 1.0), e.forms.constant("f16", 0.0)
    return e.per_component("bool", "f16", [x], lambda c: e.fn.ops.select(e.f16, c, one, zero))


@lowers("reduce_sum", "reduce_max")
def reduce(e: CoopvecEmitter, instr: Instr) -> Held:
    x = e.held[instr.args[0]]
    group = instr.attrs["group"]
    is_sum = instr.op == "reduce_sum"
    dtype = "f32" if is_sum else x.dtype
    scalars = e.forms.components(x, dtype)
    totals = []
    for g in range(instr.type.size):
        total = scalars[g * group]
        for s in scalars[g * group + 1:(g + 1) * group]:
            total = (e.fn.ops.float_add(e.f32, total, s) if is_sum
                     else e.glsl(e.forms.scalar_types[dtype], "FMax", total, s))
        totals.append(total)
    return e.forms.from_scalars(dtype, totals)
