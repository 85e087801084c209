"""Emitting the collectives as loops: the output's elements are split over the work-group's invocations (element e
on invocation e mod the work-group size), each computing its element's sum in the output's element type (float32
for f16 and bf16 outputs), then B := alpha p + beta B, where beta 0 leaves B unread (BLAS's rule). With the atomic
flag the update is an atomic add (beta 1) or an atomic store (beta 0). A barrier follows, as tinytc inserts them.
gemm runs on KHR cooperative matrices instead where the device and the operands allow (emit_gemm_matrices.py)."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.codegen.emit_gemm_matrices import emit_gemm_on_matrices, matrix_plan
from coopnn.tl.codegen.emit_memory import atomic_update
from coopnn.tl.codegen.emit_scalar import binary, convert
from coopnn.tl.codegen.emitter import Emitter, MemrefValue, Typed, emits
from coopnn.tl.types import F32, ScalarType
from coopnn.shaders.spirv.ops import Ops


def compute_type(element: ScalarType) -> ScalarType:
    return F32 if element.name in ("f16", "bf16") else element


class Reader:
    """Loads of a memref operand as values of the compute type."""

    def __init__(self, e: Emitter, memref: MemrefValue, t: ScalarType, transpose: str = "n"):
        self.e, self.memref, self.t, self.transpose = e, memref, t, transpose

    def __call__(self, *indices):
        if self.transpose == "t" and len(indices) == 2:
            indices = indices[::-1]
        value = self.e.load_element(self.memref, self.e.flat_index(self.memref, list(indices)))
        return convert(self.e, Typed(value, self.memref.element), self.t)

    def extent(self, mode: int):
        """The size of op(memref) along `mode`."""
        shape = self.memref.shape
        return shape[::-1][mode] if self.transpose == "t" and len(shape) == 2 else shape[mode]


def _accumulate(e: Emitter, t: ScalarType, count, term):
    """sum over k < count of term(k), in a function variable."""
    total = e.fn.variable(e.value_type(t))
    e.fn.ops.store(total, _zero(e, t))
    with e.fn.for_range(e.index(0), count) as k:
        updated = binary(e, "add", t, e.fn.ops.load(e.value_type(t), total), term(k))
        e.fn.ops.store(total, updated)
    return e.fn.ops.load(e.value_type(t), total)


def _products(e: Emitter, i: ast.Collective, t: ScalarType, operands):
    """The function giving p at an output multi-index."""
    mul = lambda a, b: binary(e, "mul", t, a, b)  # noqa: E731
    if i.op == "axpby":
        a = Reader(e, operands[1], t, i.transposes[0])
        return lambda idx: a(*idx)
    if i.op == "hadamard":
        a, b = Reader(e, operands[1], t), Reader(e, operands[2], t)
        return lambda idx: mul(a(*idx), b(*idx))
    if i.op == "ger":
        a, b = Reader(e, operands[1], t), Reader(e, operands[2], t)
        return lambda idx: mul(a(idx[0]), b(idx[1]))
    if i.op == "gemm":
        a, b = Reader(e, operands[1], t, i.transposes[0]), Reader(e, operands[2], t, i.transposes[1])
        return lambda idx: _accumulate(e, t, a.extent(1), lambda k: mul(a(idx[0], k), b(k, idx[1])))
    if i.op == "gemv":
        a, b = Reader(e, operands[1], t, i.transposes[0]), Reader(e, operands[2], t)
        return lambda idx: _accumulate(e, t, a.extent(1), lambda k: mul(a(idx[0], k), b(k)))
    a = Reader(e, operands[1], t, i.transposes[0])
    if operands[-1].shape:
        return lambda idx: _accumulate(e, t, a.extent(1), lambda k: a(idx[0], k))
    return lambda idx: _accumulate(e, t, a.extent(0), lambda k: a(k))


def _zero(e: Emitter, t: ScalarType):
    return convert(e, Typed(e.index(0), ScalarType("index")), t)


def _update(e: Emitter, i: ast.Collective, out: MemrefValue, flat, t: ScalarType, alpha, beta, product) -> None:
    scaled = binary(e, "mul", t, alpha, product)
    zero = _zero(e, t)
    beta_is_zero = _equal(e, t, beta.id, zero)
    if i.atomic:
        if out.element.component().size < 4 or compute_type(out.element) != out.element:
            e.fail(i, f"atomic collectives on {out.element} are not supported by the SPIR-V compiler")
        with e.fn.if_(beta_is_zero) as branch:
            e.store_element(out, flat, scaled)
            branch.else_()
            atomic_update(e, "add", out, flat, Typed(scaled, t), ast.Atomic("device"))
        return
    old = convert(e, Typed(e.load_element(out, flat), out.element), t)
    kept = binary(e, "mul", t, beta.id, old)
    total = binary(e, "add", t, scaled, e.fn.ops.select(e.value_type(t), beta_is_zero, zero, kept))
    e.store_element(out, flat, convert(e, Typed(total, t), out.element))


def _equal(e: Emitter, t: ScalarType, a, b):
    if t.is_complex:
        return e.fn.ops.all_true(e.bool, e.fn.ops.float_equal(e.m.type_vector(e.bool, 2), a, b))
    return (Ops.int_equal if t.is_integer else Ops.float_equal)(e.fn.ops, e.bool, a, b)


def _cumsum(e: Emitter, i: ast.Collective, t, alpha, beta, operands) -> None:
    a, out = operands[1], operands[-1]
    read = Reader(e, a, t)
    others = [s for k, s in enumerate(out.shape) if k != i.mode]
    with e.fn.for_range(e.local_index(), e.index_product(others), e.index(e.launch.work_items)) as line:
        fixed = e.index_positions(line, others)
        total = e.fn.variable(e.value_type(t))
        e.fn.ops.store(total, _zero(e, t))
        with e.fn.for_range(e.index(0), out.shape[i.mode]) as j:
            idx = fixed[:i.mode] + [j] + fixed[i.mode:]
            running = binary(e, "add", t, e.fn.ops.load(e.value_type(t), total), read(*idx))
            e.fn.ops.store(total, running)
            _update(e, i, out, e.flat_index(out, idx), t, alpha.id, beta, running)


@emits(ast.Collective)
def _collective(e: Emitter, i: ast.Collective):
    operands = [e.value(v) for v in i.operands]
    out = operands[-1]
    t = compute_type(out.element)
    alpha = Typed(convert(e, operands[0], t), t)
    beta = Typed(convert(e, operands[-2], t), t)
    shape = matrix_plan(e, i, operands)
    if shape is not None:
        emit_gemm_on_matrices(e, i, operands, shape, alpha, beta)
        return ()
    if i.op == "cumsum":
        _cumsum(e, i, t, alpha, beta, operands)
    else:
        product = _products(e, i, t, operands)
        with e.fn.for_range(e.local_index(), e.index_product(out.shape), e.index(e.launch.work_items)) as linear:
            idx = e.index_positions(linear, out.shape)
            _update(e, i, out, e.flat_index(out, idx), t, alpha.id, beta, product(idx))
    e.barrier()
    return ()
