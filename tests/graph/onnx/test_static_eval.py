"""Import-time evaluation: the symbolic batch size in shape tensors and integer semantics."""

import numpy as np
import pytest

from coopnn.graph.ir import Op
from coopnn.graph.onnx.static_eval import (
    BATCH,
    BatchDim,
    StaticEvalError,
    cast_static,
    evaluate_static,
    exact_div,
    is_symbolic,
    normalize,
    product,
    shape_tensor,
)


def test_batch_dim_scales_and_compares():
    assert BATCH * 3 == BatchDim(3) == 3 * BATCH
    assert BATCH != 1 and BATCH == BatchDim(1) and BatchDim(2) != BATCH
    assert repr(BATCH) == "batch" and repr(BatchDim(4)) == "4*batch"
    assert product([BATCH, 3, 4]) == BatchDim(12) and product([3, 4]) == 12


@pytest.mark.parametrize("operation", [lambda: BATCH + 1, lambda: BATCH - 1, lambda: BATCH < 4, lambda: BATCH * BATCH,
                                       lambda: -BATCH])
def test_batch_dim_refuses_what_it_cannot_know(operation):
    with pytest.raises(StaticEvalError):
        operation()


@pytest.mark.parametrize("a, b, expected", [(12, 4, 3), (BatchDim(12), 4, BatchDim(3)), (BatchDim(12), BATCH, 12),
                                            (BatchDim(12), BatchDim(4), 3)])
def test_exact_div(a, b, expected):
    assert exact_div(a, b) == expected


@pytest.mark.parametrize("a, b", [(12, 5), (BatchDim(12), 5), (12, BATCH), (3, 0)])
def test_exact_div_refuses_remainders(a, b):
    with pytest.raises(StaticEvalError):
        exact_div(a, b)


def test_shape_tensors_hold_the_batch_as_a_symbol():
    dims = shape_tensor((None, 3, 4))
    assert dims.dtype == object and is_symbolic(dims)
    assert normalize(dims[1:]).dtype == np.int64 and not is_symbolic(normalize(dims[1:]))


def test_integer_operators_keep_integers_and_the_symbol():
    dims = shape_tensor((None, 3, 4))
    assert evaluate_static(Op.MUL, [dims, np.int64(2)], {}).tolist() == [BatchDim(2), 6, 8]
    assert evaluate_static(Op.DIV, [np.int64([-7, 7]), np.int64(2)], {}).tolist() == [-3, 3]  # toward zero
    assert evaluate_static(Op.EQUAL, [dims, np.int64(3)], {}).tolist() == [False, True, False]
    joined = evaluate_static(Op.CONCAT, [dims[:1], np.int64([-1])], {"axis": 0})
    assert joined.tolist() == [BATCH, -1]
    assert evaluate_static(Op.SLICE, [dims], {"axis": 0, "start": 1, "stop": 3, "step": 1}).dtype == np.int64


def test_float_operands_use_float32_semantics():
    result = evaluate_static(Op.ADD, [np.float32([0.5]), np.int64([1])], {})
    assert result.dtype == np.float32 and result.tolist() == [1.5]


def test_the_batch_size_cannot_enter_float_values():
    with pytest.raises(StaticEvalError):
        evaluate_static(Op.ADD, [shape_tensor((None, 3)), np.float32(1)], {})
    with pytest.raises(StaticEvalError):
        cast_static(shape_tensor((None, 3)), "f32")


def test_integer_evaluation_covers_shape_arithmetic_only():
    with pytest.raises(StaticEvalError, match="exp"):
        evaluate_static(Op.EXP, [np.int64([1])], {})


@pytest.mark.parametrize("to, expected", [
    ("i64", np.int64([1, -2, 0])),
    ("bool", np.bool_([True, True, True])),
    ("f16", np.float16([1.5, -2.5, 0.1]).astype(np.float32)),
])
def test_cast_static(to, expected):
    result = cast_static(np.float32([1.5, -2.5, 0.1]), to)
    assert result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)
