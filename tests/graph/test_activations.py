"""The activation table: every reader covers every row (operator table, ONNX import and export, kernel expansion
and derivative), and the ONNX attributes are the reference's, with its defaults."""

from __future__ import annotations

import inspect

import numpy as np
import onnx
import pytest
from onnx import helper

import coopnn
from coopnn.graph import ops
from coopnn.graph.activations import ACTIVATIONS
from coopnn.graph.ir import Op
from coopnn.graph.onnx import registry
from coopnn.graph.onnx.export import OPSET, export_onnx
from coopnn.shaders.kernel.activations import EXPANSIONS
from coopnn.shaders.kernel.derivatives import DERIVATIVES
from tests.tl.functions.examples import made_activation

STEP_FUNCTIONS = {Op.FLOOR, Op.CEIL, Op.SIGN}
WITH_ONNX = sorted((op for op, a in ACTIVATIONS.items() if a.onnx is not None), key=lambda op: op.value)


def test_the_operator_table_registers_every_activation_with_its_reference():
    assert {op for op, d in ops.REGISTRY.items() if d.fusable_activation} == set(ACTIVATIONS)
    for op, activation in ACTIVATIONS.items():
        assert ops.opdef(op).kind == "unary" and ops.opdef(op).eval_fn is activation.forward, op


def test_the_kernel_expands_every_activation_and_differentiates_all_but_the_step_functions():
    assert set(ACTIVATIONS) <= set(EXPANSIONS)
    assert set(ACTIVATIONS) - set(DERIVATIVES) == STEP_FUNCTIONS


@pytest.mark.parametrize("op", WITH_ONNX, ids=lambda op: op.value)
def test_onnx_attributes_are_the_references_with_its_defaults(op):
    onnx_form = ACTIVATIONS[op].onnx
    assert set(onnx_form.attributes) <= set(ops.forward_defaults(op))
    for version in onnx_form.since:
        assert registry.lookup("", onnx_form.op_type, version) is not None, (onnx_form.op_type, version)
    schema = onnx.defs.get_schema(onnx_form.op_type, OPSET)
    assert set(onnx_form.attributes) == set(schema.attributes), onnx_form.op_type
    for name in onnx_form.attributes:
        default = helper.get_attribute_value(schema.attributes[name].default_value)
        expected = ops.forward_defaults(op)[name]
        assert (default.decode() if isinstance(default, bytes) else default) == pytest.approx(expected), name


@pytest.mark.parametrize("op", WITH_ONNX, ids=lambda op: op.value)
def test_every_activation_with_an_onnx_operator_imports_and_exports_as_it(op):
    onnx_form = ACTIVATIONS[op].onnx
    node = helper.make_node(onnx_form.op_type, ["x"], ["y"])
    value = lambda name: helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, ["batch", 3])  # noqa: E731
    model = helper.make_model(helper.make_graph([node], "one", [value("x")], [value("y")]),
                              opset_imports=[helper.make_opsetid("", OPSET)])
    graph = coopnn.load(model, backend="numpy").graph
    assert [n.op for n in graph.nodes] == [op]
    assert [n.op_type for n in export_onnx(graph).graph.node] == [onnx_form.op_type]


def test_references_take_only_keyword_attributes_with_defaults():
    for op, activation in ACTIVATIONS.items():
        x, *attributes = inspect.signature(activation.forward).parameters.values()
        assert all(p.default is not inspect.Parameter.empty for p in attributes), op
        attrs = {name: made_activation(op).attrs[name] for name in activation.required}
        assert activation.forward(np.ones(2, np.float32), **attrs).dtype == np.float32, op
