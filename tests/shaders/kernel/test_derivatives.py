"""The kernel derivatives of the unary operators, run by the kernel interpreter, against `coopnn.train.activation_grads`
in float32: the same rules evaluated on numpy arrays, which differ only where a rule applies a graph activation (the
kernel's expansion there, the numpy reference on arrays)."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import CompileError
from coopnn.graph import ops
from coopnn.graph.ir import Op
from coopnn.shaders.kernel.builder import KernelBuilder
from coopnn.shaders.kernel.derivatives import DERIVATIVES, derivative
from coopnn.shaders.kernel.interpret import run_program
from coopnn.shaders.kernel.program import VecType
from coopnn import tl
from coopnn.train import activation_grads
from tests.tl.functions.examples import WAVE, made_activation

# 0 and the kinks (hard_swish at +-3, hard_sigmoid's corners at +-2.5, the clip bounds below), tiny and large
# magnitudes on both sides, where overflow-free forms and branch choices show
_MAGNITUDES = [1e-7, 1e-3, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 3.0, 5.0, 20.0, 80.0]
GRID = np.array([0.0] + _MAGNITUDES + [-m for m in _MAGNITUDES], np.float32)
FEATURES = 2  # two components per sample, so a constant of the wrong size cannot hide behind broadcasting

CASES = [
    (Op.RELU, {}), (Op.LEAKY_RELU, {}), (Op.LEAKY_RELU, {"alpha": 0.2}), (Op.LEAKY_RELU, {"alpha": 2.0}),
    (Op.ELU, {}), (Op.ELU, {"alpha": 0.5}), (Op.SELU, {}), (Op.CELU, {}), (Op.CELU, {"alpha": 2.0}),
    (Op.SIGMOID, {}), (Op.HARD_SIGMOID, {}), (Op.HARD_SIGMOID, {"alpha": 0.4, "beta": 0.3}), (Op.HARD_SWISH, {}),
    (Op.TANH, {}), (Op.SOFTPLUS, {}), (Op.SOFTPLUS, {"beta": 2.0}), (Op.SOFTPLUS, {"beta": 2.0, "threshold": 3.0}),
    (Op.SOFTSIGN, {}), (Op.GELU, {}), (Op.GELU, {"approximate": "tanh"}), (Op.SILU, {}), (Op.MISH, {}),
    (Op.CLIP, {}), (Op.CLIP, {"min": -0.5, "max": 1.5}), (Op.CLIP, {"max": 0.5}), (Op.CLIP, {"min": -1.0}),
    (Op.EXP, {}), (Op.LOG, {}), (Op.SIN, {}), (Op.COS, {}), (Op.NEG, {}), (Op.ABS, {}), (Op.SQRT, {}),
    (Op.RECIPROCAL, {}), (Op.ERF, {}), (Op.IDENTITY, {}),
    # tensor-language functions: one with its derivative given as a function, one differentiated
    (Op.TL_FUNCTION, dict(made_activation(Op.TL_FUNCTION).attrs)), (Op.TL_FUNCTION, dict(tl.activation(WAVE).attrs)),
]


def _case_id(op: Op, attrs: dict) -> str:
    shown = {k: v for k, v in attrs.items() if k != "text"}  # a function's text is too long for a test id
    return f"{op.value}{shown or ''}"


def _kernel_derivative(op: Op, attrs: dict, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """dy/dx from a kernel program that loads x and y and stores the derivative, run by the interpreter."""
    k = KernelBuilder("derivative")
    values = {}
    for name in ("x", "y"):
        k.add_param(name, "input", (FEATURES,), name)
        values[name] = k.emit("load", VecType("f32", FEATURES), (name,))
    output = k.add_param("dydx", "output", (FEATURES,), "dydx")
    k.emit("store", None, (derivative(k, op, values["x"], values["y"], attrs), output.name))
    return run_program(k.build(), {"x": x, "y": y})["dydx"]


def test_every_differentiable_unary_operator_has_a_kernel_rule_and_is_checked():
    assert set(DERIVATIVES) == set(activation_grads.DIFFERENTIABLE_UNARY)
    assert {op for op, _ in CASES} == set(DERIVATIVES)


def test_every_fusable_activation_but_floor_ceil_and_sign_has_a_derivative():
    fusable = {op for op, d in ops.REGISTRY.items() if d.fusable_activation}
    assert fusable - set(DERIVATIVES) == {Op.FLOOR, Op.CEIL, Op.SIGN}


@pytest.mark.parametrize("op", [Op.FLOOR, Op.CEIL, Op.SIGN])
def test_training_through_a_step_function_is_a_compile_error(op):
    k = KernelBuilder("derivative")
    k.add_param("x", "input", (FEATURES,), "x")
    x = k.emit("load", VecType("f32", FEATURES), ("x",))
    with pytest.raises(CompileError, match=f"cannot train through {op.value}"):
        derivative(k, op, x, x, {})


@pytest.mark.parametrize("op, attrs", CASES, ids=[_case_id(op, attrs) for op, attrs in CASES])
def test_kernel_derivative_matches_the_numpy_rule(op, attrs):
    x = np.stack([GRID, GRID[::-1]], axis=1)
    y = ops.evaluate(op, [x], attrs)
    want = activation_grads.derivative(op, x, y, attrs)
    got = _kernel_derivative(op, attrs, x, y)
    assert got.dtype == np.float32
    # The rules repeat the numpy arithmetic, so most match bit for bit. Two differ within atol: GELU's exact form
    # goes through the kernel's erf, the Abramowitz-Stegun fit (|error| < 1.5e-7) where the rule calls math.erf, and
    # mish's softplus is log(1 + exp(-|x|)) where numpy's logaddexp uses log1p
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_kinks_take_the_branch_the_forward_takes():
    x = np.zeros((1, FEATURES), np.float32)
    assert _kernel_derivative(Op.RELU, {}, x, x)[0, 0] == 0
    assert _kernel_derivative(Op.LEAKY_RELU, {}, x, x)[0, 0] == 1
    assert _kernel_derivative(Op.ABS, {}, x, x)[0, 0] == 0
    at_bounds = np.array([[-0.5, 1.5]], np.float32)
    assert (_kernel_derivative(Op.CLIP, {"min": -0.5, "max": 1.5}, at_bounds, at_bounds) == 1).all()


def test_large_inputs_do_not_overflow():
    x = np.array([[-80.0, 80.0], [-1e4, 1e4]], np.float32)
    for op, attrs in CASES:
        if op not in (Op.EXP, Op.LOG, Op.SQRT, Op.RECIPROCAL):
            got = _kernel_derivative(op, attrs, x, ops.evaluate(op, [x], attrs))
            assert np.isfinite(got).all(), op
