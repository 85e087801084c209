"""Softmax and LogSoftmax (both axis semantics) and LayerNormalization over feature axes."""

import numpy as np
import pytest
from onnx import helper

from coopnn.errors import UnsupportedOperatorError
from coopnn.graph.ir import Op
from coopnn.graph.onnx import import_model

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset, axis", [(11, None), (11, 1), (11, 2), (11, -1), (13, None), (13, 1), (13, -2)])
def test_softmax_axis_semantics(onnx_model, check_import, op_type, opset, axis):
    """Before opset 13 the input is coerced to 2-D at `axis` (default 1); from 13 `axis` (default -1) is one axis."""
    node = helper.make_node(op_type, ["x"], ["y"], **({} if axis is None else {"axis": axis}))
    graph = check_import(onnx_model([node], {"x": ["N", 3, 4]}, ["y"], opset=opset))
    assert sum(n.op in (Op.SOFTMAX, Op.LOG_SOFTMAX) for n in graph.nodes) == 1


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_over_the_batch_is_unsupported(onnx_model, opset):
    node = helper.make_node("Softmax", ["x"], ["y"], axis=0, name="sm")
    with pytest.raises(UnsupportedOperatorError, match="'sm'.*batch axis"):
        import_model(onnx_model([node], {"x": ["N", 3]}, ["y"], opset=opset))


@pytest.mark.parametrize("axis, shape", [(-1, (4,)), (2, (4,)), (-2, (3, 4)), (1, (3, 4))])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_normalization(onnx_model, check_import, axis, shape, with_bias):
    inputs = ["x", "scale"] + (["bias"] if with_bias else [])
    node = helper.make_node("LayerNormalization", inputs, ["y"], axis=axis, epsilon=1e-3)
    constants = {"scale": RNG.uniform(0.5, 1.5, shape).astype(np.float32),
                 "bias": RNG.standard_normal(shape).astype(np.float32)}
    graph = check_import(onnx_model([node], {"x": ["N", 3, 4]}, ["y"], constants, opset=17))
    assert [n.op for n in graph.nodes] == [Op.LAYER_NORM]


def test_layer_normalization_statistics_outputs(onnx_model, check_import):
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y", "mean", "inv_std"], axis=-1)
    constants = {"scale": np.ones(4, np.float32)}
    check_import(onnx_model([node], {"x": ["N", 4]}, ["y", "mean", "inv_std"], constants, opset=17))


def test_layer_normalization_over_the_batch_is_unsupported(onnx_model):
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y"], axis=0, name="ln")
    with pytest.raises(UnsupportedOperatorError, match="'ln'.*batch axis"):
        import_model(onnx_model([node], {"x": ["N", 4]}, ["y"], {"scale": np.ones((5, 4), np.float32)}, opset=17))
