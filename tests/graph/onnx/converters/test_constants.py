"""Constant, ConstantOfShape, Identity and Cast."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from coopnn.errors import UnsupportedOperatorError
from coopnn.graph.ir import Op
from coopnn.graph.onnx import import_model

CONSTANT_FORMS = [
    {"value": numpy_helper.from_array(np.float32([1.5, -2.0, 0.5]))},
    {"value_float": 2.5},
    {"value_floats": [1.0, 2.0, 3.0]},
]


@pytest.mark.parametrize("attrs", CONSTANT_FORMS, ids=["tensor", "float", "floats"])
@pytest.mark.parametrize("opset", [9, 13, 19])
def test_constant_feeds_a_node(onnx_model, check_import, attrs, opset):
    if opset < 12 and "value" not in attrs:
        attrs = {"value": numpy_helper.from_array(np.float32(attrs.get("value_float", attrs.get("value_floats"))))}
    nodes = [helper.make_node("Constant", [], ["c"], **attrs), helper.make_node("Mul", ["x", "c"], ["y"])]
    graph = check_import(onnx_model(nodes, {"x": ["N", 3]}, ["y"], opset=opset))
    assert [n.op for n in graph.nodes] == [Op.MUL] and graph.constants["c"].dtype == np.float32


@pytest.mark.parametrize("attrs, out_shape", [
    ({"value_int": 1}, ["N", 1, 3]),
    ({"value_ints": [1, 2]}, ["N", 1, 1, 3]),
])
def test_integer_constants_feed_shape_computations(onnx_model, check_import, attrs, out_shape):
    nodes = [
        helper.make_node("Constant", [], ["axes"], **attrs),
        helper.make_node("Unsqueeze", ["x", "axes"], ["y"]),
    ]
    if "value_int" in attrs:  # a scalar axis: Unsqueeze wants a 1-D list
        nodes.insert(1, helper.make_node("Reshape", ["axes", "one"], ["axes_1d"]))
        nodes[2] = helper.make_node("Unsqueeze", ["x", "axes_1d"], ["y"])
    graph = check_import(onnx_model(nodes, {"x": ["N", 3]}, {"y": out_shape}, {"one": np.int64([1])}))
    assert graph.constants == {}


def test_sparse_constant_is_unsupported(onnx_model):
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.float32([1.0]), "v"), numpy_helper.from_array(np.int64([0]), "i"), [3])
    nodes = [helper.make_node("Constant", [], ["c"], sparse_value=sparse, name="sp"),
             helper.make_node("Add", ["x", "c"], ["y"])]
    with pytest.raises(UnsupportedOperatorError, match="sp.*sparse_value"):
        import_model(onnx_model(nodes, {"x": ["N", 3]}, ["y"]))


@pytest.mark.parametrize("opset", [9, 20])
@pytest.mark.parametrize("value", [None, np.float32([0.25]), np.int64([3])])
def test_constant_of_shape(onnx_model, check_import, opset, value):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "one", "two"], ["features"]),
        helper.make_node("ConstantOfShape", ["features"], ["filled"], **attrs),
        helper.make_node("Cast", ["filled"], ["filled_f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "filled_f"], ["y"]),
    ]
    constants = {"one": np.int64([1]), "two": np.int64([2])}
    graph = check_import(onnx_model(nodes, {"x": ["N", 3]}, ["y"], constants, opset=max(opset, 13)))
    assert [n.op for n in graph.nodes] == [Op.ADD]


def test_constant_of_a_batch_sized_shape_is_unsupported(onnx_model):
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["zeros"], name="zeros_like"),
        helper.make_node("Add", ["x", "zeros"], ["y"]),
    ]
    with pytest.raises(UnsupportedOperatorError, match="zeros_like.*batch size"):
        import_model(onnx_model(nodes, {"x": ["N", 3]}, ["y"]))


@pytest.mark.parametrize("opset", [1, 13, 16, 19])
def test_identity(onnx_model, check_import, opset):
    graph = check_import(onnx_model([helper.make_node("Identity", ["x"], ["y"])], {"x": ["N", 3]}, ["y"],
                                    opset=max(opset, 7)))
    assert [n.op for n in graph.nodes] == [Op.IDENTITY]


@pytest.mark.parametrize("to", [TensorProto.FLOAT, TensorProto.DOUBLE])
def test_cast_between_float_types_is_an_identity(onnx_model, check_import, to):
    graph = check_import(onnx_model([helper.make_node("Cast", ["x"], ["y"], to=to)], {"x": ["N", 3]}, ["y"]))
    assert [n.op for n in graph.nodes] == [Op.IDENTITY]


def test_cast_of_masks(onnx_model, check_import):
    nodes = [
        helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BOOL),
        helper.make_node("Cast", ["b"], ["y"], to=TensorProto.FLOAT),
    ]
    feeds = {"x": np.float32([[0.0, 1.0, -2.0], [0.5, 0.0, np.nan]] * 3)}
    graph = check_import(onnx_model(nodes, {"x": ["N", 3]}, ["y"]), feeds=feeds)
    assert [n.op for n in graph.nodes] == [Op.CAST, Op.CAST]


@pytest.mark.parametrize("to", [TensorProto.INT64, TensorProto.FLOAT16])
def test_cast_of_run_time_values_to_narrower_types_is_unsupported(onnx_model, to):
    node = helper.make_node("Cast", ["x"], ["y"], to=to, name="narrow")
    with pytest.raises(UnsupportedOperatorError, match="narrow.*computed at run time"):
        import_model(onnx_model([node], {"x": ["N", 3]}, ["y"]))


@pytest.mark.parametrize("to", [TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT32])
def test_cast_of_constants_rounds(onnx_model, check_import, to):
    nodes = [
        helper.make_node("Cast", ["c"], ["narrow"], to=to),
        helper.make_node("Cast", ["narrow"], ["wide"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "wide"], ["y"]),
    ]
    constants = {"c": np.float32([0.1, -2.7, 1000.3])}
    check_import(onnx_model(nodes, {"x": ["N", 3]}, ["y"], constants), rtol=0, atol=0)


@pytest.mark.parametrize("dims", [[-3], [1 << 20, 1 << 10, 3]])
def test_constant_of_shape_refuses_negative_or_huge_shapes(onnx_model, dims):
    nodes = [  # dims behind an Identity, where ONNX shape inference does not look
        helper.make_node("Identity", ["dims"], ["dims_copy"]),
        helper.make_node("ConstantOfShape", ["dims_copy"], ["filled"], name="fill"),
        helper.make_node("Add", ["x", "filled"], ["y"]),
    ]
    model = onnx_model(nodes, {"x": ["N", 3]}, ["y"], {"dims": np.int64(dims)})
    with pytest.raises(UnsupportedOperatorError, match="fill.*would build a constant"):
        import_model(model)
