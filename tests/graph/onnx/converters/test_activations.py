"""Activation functions import as one IR node each, with ONNX defaults and attributes, and match onnxruntime."""

import numpy as np
import pytest
from onnx import helper

from coopnn.errors import UnsupportedOperatorError
from coopnn.graph.ir import Op
from coopnn.graph.onnx import import_model

# (op_type, attributes, opsets to try, IR operator)
CASES = [
    ("Relu", {}, (6, 13, 14), Op.RELU),
    ("LeakyRelu", {}, (6, 16), Op.LEAKY_RELU),
    ("LeakyRelu", {"alpha": 0.2}, (16,), Op.LEAKY_RELU),
    ("Elu", {}, (6, 22), Op.ELU),
    ("Elu", {"alpha": 0.5}, (13,), Op.ELU),
    ("Selu", {}, (6,), Op.SELU),
    ("Selu", {"alpha": 1.5, "gamma": 0.9}, (13,), Op.SELU),
    ("Celu", {"alpha": 2.0}, (12,), Op.CELU),
    ("Sigmoid", {}, (6, 13), Op.SIGMOID),
    ("HardSigmoid", {}, (6,), Op.HARD_SIGMOID),
    ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}, (13, 22), Op.HARD_SIGMOID),
    ("HardSwish", {}, (14, 22), Op.HARD_SWISH),
    ("Tanh", {}, (6, 13), Op.TANH),
    ("Softplus", {}, (1, 13, 22), Op.SOFTPLUS),
    ("Softsign", {}, (1, 22), Op.SOFTSIGN),
    ("Gelu", {}, (20,), Op.GELU),
    ("Gelu", {"approximate": "tanh"}, (20,), Op.GELU),
    ("Mish", {}, (18, 22), Op.MISH),
]


@pytest.mark.parametrize("op_type, attrs, opsets, ir_op", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_activation(onnx_model, check_import, op_type, attrs, opsets, ir_op):
    for opset in opsets:
        node = helper.make_node(op_type, ["x"], ["y"], **attrs)
        graph = check_import(onnx_model([node], {"x": ["N", 5, 3]}, ["y"], opset=opset))
        assert [n.op for n in graph.nodes] == [ir_op]


@pytest.mark.parametrize("slope", [np.array([0.25]), np.linspace(-1, 1, 3), np.linspace(0, 1, 3).reshape(1, 3)])
@pytest.mark.parametrize("opset", [9, 16])
def test_prelu_slope_broadcasts(onnx_model, check_import, slope, opset):
    node = helper.make_node("PRelu", ["x", "slope"], ["y"])
    graph = check_import(onnx_model([node], {"x": ["N", 3]}, ["y"], {"slope": slope.astype(np.float32)}, opset=opset))
    assert [n.op for n in graph.nodes] == [Op.PRELU]


@pytest.mark.parametrize("attrs", [{"min": -0.5}, {"max": 0.5}, {"min": 0.0, "max": 6.0}, {}])
def test_clip_with_attributes_opset_6(onnx_model, check_import, attrs):
    node = helper.make_node("Clip", ["x"], ["y"], **attrs)
    graph = check_import(onnx_model([node], {"x": ["N", 4]}, ["y"], opset=6))
    assert graph.nodes[0].attrs["min"] == attrs.get("min")
    assert graph.nodes[0].attrs["max"] == attrs.get("max")


@pytest.mark.parametrize("opset", [11, 12, 13])
@pytest.mark.parametrize("bounds", [("lo", "hi"), ("lo", ""), ("", "hi"), ("lo",)])
def test_clip_with_constant_inputs(onnx_model, check_import, opset, bounds):
    node = helper.make_node("Clip", ["x", *bounds], ["y"])
    constants = {"lo": np.array(-0.5, np.float32), "hi": np.array(1.5, np.float32)}
    graph = check_import(onnx_model([node], {"x": ["N", 4]}, ["y"], constants, opset=opset))
    assert [n.op for n in graph.nodes] == [Op.CLIP]


def test_clip_bound_computed_at_run_time_is_unsupported(onnx_model):
    nodes = [
        helper.make_node("ReduceMax", ["x"], ["m"], axes=[1]),
        helper.make_node("Clip", ["x", "", "m"], ["y"], name="clip"),
    ]
    with pytest.raises(UnsupportedOperatorError, match="clip.*max .*must be a constant"):
        import_model(onnx_model(nodes, {"x": ["N", 4]}, ["y"]))


def test_clip_from_a_constant_node(onnx_model, check_import):
    nodes = [
        helper.make_node("Constant", [], ["six"], value_float=6.0),
        helper.make_node("Clip", ["x", "", "six"], ["y"]),
    ]
    feeds = {"x": np.linspace(-9, 9, 28, dtype=np.float32).reshape(7, 4)}
    graph = check_import(onnx_model(nodes, {"x": ["N", 4]}, ["y"]), feeds=feeds)
    assert graph.nodes[0].attrs["max"] == 6.0 and graph.constants == {}
