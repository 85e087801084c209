"""The derivative of every differentiable unary operator against central differences of its forward, in float64."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.graph import ops
from coopnn.graph.ir import Op
from coopnn.graph.ops import forward_defaults
from coopnn.train.activation_grads import DIFFERENTIABLE_UNARY, derivative
from tests.train.conftest import STEP

# points on both sides of every kink (0, +-3 for hard_swish, the hard_sigmoid corners) but not on them
POINTS = np.array([-4.1, -2.7, -1.3, -0.6, -0.21, -0.03, 0.04, 0.18, 0.7, 1.2, 2.4, 3.6])
POSITIVE = np.array([0.05, 0.3, 0.9, 1.7, 4.2])

CASES = [
    (Op.RELU, {}), (Op.LEAKY_RELU, {}), (Op.LEAKY_RELU, {"alpha": 0.2}), (Op.ELU, {}), (Op.ELU, {"alpha": 0.5}),
    (Op.SELU, {}), (Op.CELU, {}), (Op.CELU, {"alpha": 2.0}), (Op.SIGMOID, {}), (Op.HARD_SIGMOID, {}),
    (Op.HARD_SIGMOID, {"alpha": 0.4, "beta": 0.3}), (Op.HARD_SWISH, {}), (Op.TANH, {}), (Op.SOFTPLUS, {}),
    (Op.SOFTPLUS, {"beta": 2.0}), (Op.SOFTPLUS, {"beta": 2.0, "threshold": 3.0}), (Op.SOFTSIGN, {}), (Op.GELU, {}),
    (Op.GELU, {"approximate": "tanh"}), (Op.SILU, {}), (Op.MISH, {}), (Op.CLIP, {"min": -1.0, "max": 0.5}),
    (Op.CLIP, {"max": 0.5}), (Op.EXP, {}), (Op.LOG, {}), (Op.SIN, {}), (Op.COS, {}), (Op.NEG, {}), (Op.ABS, {}),
    (Op.SQRT, {}), (Op.RECIPROCAL, {}), (Op.ERF, {}), (Op.IDENTITY, {}),
]
_POSITIVE_DOMAIN = {Op.LOG, Op.SQRT}


def test_every_differentiable_unary_operator_is_checked():
    # a tensor-language function computes in its text's f32, which float64 central differences do not resolve:
    # tests/tl/functions/test_differentiate.py checks its derivatives against hand-written numpy ones
    assert {op for op, _ in CASES} | {Op.TL_FUNCTION} == set(DIFFERENTIABLE_UNARY)


def test_floor_ceil_and_sign_have_no_rule():
    assert not {Op.FLOOR, Op.CEIL, Op.SIGN, Op.NOT} & DIFFERENTIABLE_UNARY


@pytest.mark.parametrize("op, attrs", CASES, ids=[f"{op.value}{attrs or ''}" for op, attrs in CASES])
def test_derivative_matches_central_differences(float64_ops, op, attrs):
    x = POSITIVE if op in _POSITIVE_DOMAIN else POINTS
    y = ops.evaluate(op, [x], attrs)
    assert y.dtype == np.float64
    numeric = (ops.evaluate(op, [x + STEP], attrs) - ops.evaluate(op, [x - STEP], attrs)) / (2 * STEP)
    analytic = derivative(op, x, y, attrs)
    assert analytic.dtype == np.float64 and analytic.shape == x.shape
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


def test_float32_inputs_give_float32_derivatives():
    x = POINTS.astype(np.float32)
    for op, attrs in CASES:
        if op not in _POSITIVE_DOMAIN:
            assert derivative(op, x, ops.evaluate(op, [x], attrs), attrs).dtype == np.float32, op


def test_kinks_take_the_branch_the_forward_takes():
    zero = np.zeros(1)
    assert derivative(Op.RELU, zero, zero, {})[0] == 0
    assert derivative(Op.LEAKY_RELU, zero, zero, {})[0] == 1  # the forward picks x itself at 0
    assert derivative(Op.ABS, zero, zero, {})[0] == 0


def test_attribute_defaults_are_the_forwards():
    assert forward_defaults(Op.LEAKY_RELU) == {"alpha": 0.01}
    assert forward_defaults(Op.SOFTPLUS) == {"beta": 1.0, "threshold": None}
