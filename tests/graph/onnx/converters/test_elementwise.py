"""Arithmetic, comparisons, logical operators and Where: numpy broadcasting against constants and between inputs."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from coopnn.errors import UnsupportedOperatorError
from coopnn.graph.ir import Op
from coopnn.graph.onnx import import_model

RNG = np.random.default_rng(2)
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"]
COMPARISONS = {"Less": 13, "LessOrEqual": 16, "Greater": 13, "GreaterOrEqual": 16, "Equal": 13}
UNARY = {
    "Neg": Op.NEG, "Abs": Op.ABS, "Sqrt": Op.SQRT, "Reciprocal": Op.RECIPROCAL, "Floor": Op.FLOOR,
    "Ceil": Op.CEIL, "Sign": Op.SIGN, "Exp": Op.EXP, "Log": Op.LOG, "Sin": Op.SIN, "Cos": Op.COS, "Erf": Op.ERF,
}


def _positive_feeds(graph):
    """Feeds in [0.5, 2]: Pow, Sqrt and Log stay real."""
    return {v.name: RNG.uniform(0.5, 2, (7, *v.features)).astype(np.float32) for v in graph.inputs}


@pytest.mark.parametrize("op_type", BINARY)
@pytest.mark.parametrize("const_shape", [(), (4,), (1, 4), (3, 1)])
@pytest.mark.parametrize("const_first", [False, True])
def test_binary_with_constant(onnx_model, check_import, op_type, const_shape, const_first):
    operands = ["c", "x"] if const_first else ["x", "c"]
    node = helper.make_node(op_type, operands, ["y"])
    model = onnx_model([node], {"x": ["N", 3, 4]}, ["y"], {"c": RNG.uniform(0.5, 2, const_shape).astype(np.float32)})
    graph = import_model(model)
    check_import(model, feeds=_positive_feeds(graph))
    assert len(graph.nodes) == 1


@pytest.mark.parametrize("op_type", BINARY)
@pytest.mark.parametrize("opset", [7, 13, 18])
def test_binary_between_inputs(onnx_model, check_import, op_type, opset):
    node = helper.make_node(op_type, ["x", "z"], ["y"])
    z_shape = ["N", 3, 4] if opset < 8 and op_type in ("Max", "Min") else ["N", 1, 4]  # Max-6 does not broadcast
    model = onnx_model([node], {"x": ["N", 3, 4], "z": z_shape}, ["y"], opset=opset)
    check_import(model, feeds=_positive_feeds(import_model(model)))


@pytest.mark.parametrize("op_type", sorted(UNARY))
def test_unary(onnx_model, check_import, op_type):
    node = helper.make_node(op_type, ["x"], ["y"])
    model = onnx_model([node], {"x": ["N", 6]}, ["y"])
    graph = check_import(model, feeds=_positive_feeds(import_model(model)) if op_type in ("Sqrt", "Log") else None)
    assert [n.op for n in graph.nodes] == [UNARY[op_type]]


def test_pow_with_integer_exponent(onnx_model, check_import):
    node = helper.make_node("Pow", ["x", "e"], ["y"])
    check_import(onnx_model([node], {"x": ["N", 3]}, ["y"], {"e": np.array(3, np.int64)}, opset=15))


@pytest.mark.parametrize("op_type", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("operands", [["x"], ["x", "z"], ["x", "c", "z"]])
def test_variadic(onnx_model, check_import, op_type, operands):
    node = helper.make_node(op_type, operands, ["y"])
    constants = {"c": RNG.standard_normal(4).astype(np.float32)}
    check_import(onnx_model([node], {"x": ["N", 4], "z": ["N", 4]}, ["y"], constants))


@pytest.mark.parametrize("op_type, opset", sorted(COMPARISONS.items()))
def test_comparison_gives_a_mask(onnx_model, check_import, op_type, opset):
    node = helper.make_node(op_type, ["x", "c"], ["y"])
    constants = {"c": np.array([-0.5, 0.0, 0.5, 1.0], np.float32)}
    feeds = {"x": np.round(RNG.uniform(-1, 1, (7, 4)) * 2).astype(np.float32) / 2}  # hits the equal case
    graph = check_import(onnx_model([node], {"x": ["N", 4]}, ["y"], constants, opset=opset), feeds=feeds)
    assert graph.outputs[0].dtype == "bool"


@pytest.mark.parametrize("op_type", ["And", "Or", "Xor"])
def test_logical_on_masks(onnx_model, check_import, op_type):
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["p"]),
        helper.make_node("Less", ["z", "zero"], ["q"]),
        helper.make_node(op_type, ["p", "q"], ["r"]),
        helper.make_node("Not", ["r"], ["y"]),
    ]
    check_import(onnx_model(nodes, {"x": ["N", 4], "z": ["N", 4]}, ["y"], {"zero": np.float32(0)}))


def test_logical_on_boolean_inputs(onnx_model, check_import):
    node = helper.make_node("And", ["a", "b"], ["y"])
    graph = check_import(onnx_model([node], {"a": ["N", 4], "b": ["N", 4]}, ["y"], input_type=TensorProto.BOOL))
    assert all(v.dtype == "bool" for v in graph.inputs)


@pytest.mark.parametrize("opset", [9, 16])
def test_where_selects_between_branches(onnx_model, check_import, opset):
    """The thresholded Softplus of the dynamo exporter: where(beta*x > threshold, x, softplus(beta*x) / beta)."""
    nodes = [
        helper.make_node("Mul", ["x", "beta"], ["scaled"]),
        helper.make_node("Softplus", ["scaled"], ["soft"]),
        helper.make_node("Div", ["soft", "beta"], ["smooth"]),
        helper.make_node("Greater", ["scaled", "threshold"], ["linear"]),
        helper.make_node("Where", ["linear", "x", "smooth"], ["y"]),
    ]
    constants = {"beta": np.float32(2.0), "threshold": np.float32(1.0)}
    graph = check_import(onnx_model(nodes, {"x": ["N", 5]}, ["y"], constants, opset=opset))
    assert [n.op for n in graph.nodes] == [Op.MUL, Op.SOFTPLUS, Op.DIV, Op.GREATER, Op.WHERE]


def test_where_with_constant_branch(onnx_model, check_import):
    nodes = [helper.make_node("Less", ["x", "zero"], ["neg"]), helper.make_node("Where", ["neg", "c", "x"], ["y"])]
    check_import(onnx_model(nodes, {"x": ["N", 3]}, ["y"], {"zero": np.float32(0), "c": np.float32(-1)}))


def test_constant_only_subgraph_is_folded(onnx_model, check_import):
    nodes = [
        helper.make_node("Constant", [], ["two"], value_float=2.0),
        helper.make_node("Mul", ["c", "two"], ["c2"]),
        helper.make_node("Sin", ["c2"], ["s"]),
        helper.make_node("Add", ["x", "s"], ["y"]),
    ]
    graph = check_import(onnx_model(nodes, {"x": ["N", 3]}, ["y"], {"c": np.float32([0.1, 0.2, 0.3])}))
    assert [n.op for n in graph.nodes] == [Op.ADD]
    np.testing.assert_allclose(graph.constants["s"], np.sin(np.float32([0.2, 0.4, 0.6])), rtol=1e-6)


def test_constant_that_would_move_the_batch_axis_is_unsupported(onnx_model):
    node = helper.make_node("Add", ["x", "c"], ["y"], name="add_3d")
    with pytest.raises(UnsupportedOperatorError, match="add_3d.*batch axis must stay first"):
        import_model(onnx_model([node], {"x": ["N", 3]}, ["y"], {"c": np.zeros((2, 1, 3), np.float32)}))
