"""Trainable parameters: which constants they are, their stable names on built and imported graphs, and replacing
them through `Model.set_parameters` (eagerly or from a function called when the model next runs)."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.errors import InputError
from coopnn.graph.ir import Op
from coopnn.model import prepare
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.parameters import PARAMETER_SLOTS, parameter_constants, parameters, with_parameters
from tests.conftest import ROOT


def test_slots():
    assert PARAMETER_SLOTS[Op.LINEAR] == (None, "weight", "bias")
    assert set(PARAMETER_SLOTS) == {Op.LINEAR, Op.PRELU, Op.LAYER_NORM, Op.ENCODING}
    assert PARAMETER_SLOTS[Op.ENCODING] == (None, "params")


def test_names_of_an_imported_model_come_from_its_nodes():
    with coopnn.load(ROOT / "models" / "radiance_cache_layernorm.onnx", backend="numpy") as model:
        names = parameter_constants(model.graph)
        linear = [n for n in model.graph.nodes if n.op is Op.LINEAR]
        assert names[f"{linear[0].name}.weight"] == linear[0].inputs[1]
        assert all(name.rsplit(".", 1)[1] in {"weight", "bias", "scale", "slope"} for name in names)
        assert len(set(names.values())) == len(names)


def test_prelu_slope_and_layer_norm_scale_train_other_constants_do_not():
    b = GraphBuilder("g")
    x = b.input("x", 3)
    w = b.constant("shared", np.ones((3, 3)))
    h = b.node(Op.LINEAR, "first", [x, w])
    h = b.node(Op.LINEAR, "second", [h, w])  # a constant read twice is one parameter, named after its first reader
    h = b.node(Op.PRELU, "prelu", [h, b.constant("slope", np.full(3, 0.1))])
    h = b.node(Op.LAYER_NORM, "norm", [h, b.constant("gain", np.ones(3)), b.constant("shift", np.zeros(3))],
               axis=-1, epsilon=1e-5)
    h = b.node(Op.ADD, "offset", [h, b.constant("offset_value", np.ones(3))])
    assert parameter_constants(b.graph([h])) == {"first.weight": "shared", "prelu.slope": "slope",
                                                 "norm.scale": "gain", "norm.bias": "shift"}


def test_with_parameters_replaces_some_and_checks_names_and_shapes():
    model = coopnn.mlp(2, [4], 1, backend="numpy")
    graph = model.graph
    new = with_parameters(graph, {"layers.1.bias": [7.0]})
    assert parameters(new)["layers.1.bias"].tolist() == [7.0] and not parameters(new)["layers.1.bias"].flags.writeable
    np.testing.assert_array_equal(parameters(new)["layers.0.weight"], parameters(graph)["layers.0.weight"])
    with pytest.raises(InputError, match=r"'layers.9.bias' is not a parameter.*its parameters: layers.0.weight"):
        with_parameters(graph, {"layers.9.bias": [1.0]})
    with pytest.raises(InputError, match=r"'layers.1.bias' has shape \[2\], the model's has \[1\]"):
        model.set_parameters({"layers.1.bias": [1.0, 2.0]})


def test_set_parameters_changes_what_run_computes():
    model = coopnn.mlp(2, [4], 1, backend="numpy")
    x = np.ones((3, 2), np.float32)
    zero = {name: np.zeros_like(a) for name, a in model.parameters().items()}
    model.set_parameters(zero)
    np.testing.assert_array_equal(model.run(x), np.zeros((3, 1)))
    model.set_parameters({"layers.1.bias": [2.5]})
    np.testing.assert_array_equal(model.run(x), np.full((3, 1), 2.5))


def test_deferred_parameters_are_read_only_when_needed():
    model = coopnn.mlp(2, [4], 1, backend="numpy")
    calls = []

    def source():
        calls.append(1)
        return {"layers.1.bias": [1.5], "layers.1.weight": np.zeros((1, 4))}

    model.set_parameters(source)
    assert calls == []
    np.testing.assert_array_equal(model.run(np.ones((2, 2))), np.full((2, 1), 1.5))
    model.run(np.ones((2, 2)))
    assert calls == [1]


def test_built_graph_prepares_with_parameters_intact():
    graph = coopnn.mlp(2, [4], 1, backend="numpy").graph
    assert prepare(graph, backend="numpy").parameters().keys() == parameters(graph).keys()
