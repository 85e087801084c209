"""Reductions over feature axes, with axes as an attribute (older opsets) or as an input (newer ones)."""

import numpy as np
import pytest
from onnx import helper

from coopnn.errors import UnsupportedOperatorError
from coopnn.graph.onnx import import_model

# op_type: the first opset that takes axes as an input
AXES_AS_INPUT = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18, "ReduceSumSquare": 18,
                 "ReduceL2": 18}


def _reduce(op_type, opset, axes, **attrs):
    if opset >= AXES_AS_INPUT[op_type]:
        return helper.make_node(op_type, ["x", "axes"], ["y"], **attrs), {"axes": np.int64(axes)}
    return helper.make_node(op_type, ["x"], ["y"], axes=axes, **attrs), {}


@pytest.mark.parametrize("op_type", sorted(AXES_AS_INPUT))
@pytest.mark.parametrize("axes", [[-1], [1, 2]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_with_axes(onnx_model, check_import, op_type, axes, keepdims):
    first_input_opset = AXES_AS_INPUT[op_type]
    for opset in (11, first_input_opset - 1, first_input_opset, 20):
        node, constants = _reduce(op_type, opset, axes, keepdims=keepdims)
        check_import(onnx_model([node], {"x": ["N", 3, 4]}, ["y"], constants, opset=opset))


def test_reduce_without_axes_and_noop_flag_is_an_identity(onnx_model, check_import):
    node = helper.make_node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)
    check_import(onnx_model([node], {"x": ["N", 3]}, ["y"], opset=13))


@pytest.mark.parametrize("opset", [11, 18])
def test_reduce_over_every_axis_is_unsupported(onnx_model, opset):
    node = helper.make_node("ReduceMean", ["x"], ["y"], name="mean_all")
    with pytest.raises(UnsupportedOperatorError, match="mean_all.*batch axis"):
        import_model(onnx_model([node], {"x": ["N", 3]}, ["y"], opset=opset))
