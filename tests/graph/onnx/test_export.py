"""ONNX export: the ONNX checker passes, onnxruntime reproduces the outputs (rtol 1e-4, atol 1e-5), and importing
the export gives the same graph outputs and parameter names, for mlp models, each operator form, and the zoo."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import coopnn
from coopnn.errors import CompileError
from coopnn.graph.ir import Activation, Op
from coopnn.model import prepare
from coopnn.graph.builder import GraphBuilder
from coopnn.nets.builders import ACTIVATIONS, mlp_graph
from coopnn.graph.onnx.export import IR_VERSION, OPSET, export_onnx
from tests.conftest import ZOO, ort_run, random_feeds, zoo_ids

RTOL, ATOL = 1e-4, 1e-5


def _outputs(model, feeds):
    out = model.run(feeds)
    return out if isinstance(out, dict) else {model.outputs[0].name: out}


def _round_trip(model, tmp_path, batch: int = 37):
    """Export `model`, check it, and compare onnxruntime and the re-imported model with `model` itself."""
    path = tmp_path / "exported.onnx"
    model.save(path)
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    assert proto.opset_import[0].version == OPSET and proto.ir_version == IR_VERSION
    feeds = random_feeds(model, batch, seed=batch)
    want = _outputs(model, feeds)
    runtime = ort_run(path, feeds)
    assert set(runtime) == set(want)
    for name in want:
        np.testing.assert_allclose(runtime[name], want[name], rtol=RTOL, atol=ATOL, err_msg=name)
    with coopnn.load(path, backend="numpy") as again:
        for name, value in _outputs(again, feeds).items():
            np.testing.assert_allclose(value, want[name], rtol=RTOL, atol=ATOL, err_msg=name)
        assert again.parameters().keys() == model.parameters().keys()
        for name, array in model.parameters().items():
            np.testing.assert_array_equal(again.parameters()[name], array)


@pytest.mark.parametrize("encoding", [None, "frequency"])
def test_mlp_round_trip(tmp_path, encoding):
    model = coopnn.mlp(3, [32, 16], 4, encoding=encoding, output_activation="sigmoid", backend="numpy")
    _round_trip(model, tmp_path)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_every_fusable_activation_round_trips(tmp_path, activation):
    graph = mlp_graph(3, [8], 2, activation=activation, seed=1)
    if activation in ("log", "sqrt"):  # defined on positive inputs only: lift the hidden layer
        graph = graph.replace(constants={**graph.constants, "layers.0.bias": np.full(8, 4.0, np.float32)})
    _round_trip(prepare(graph, backend="numpy"), tmp_path)


def _special_forms():
    b = GraphBuilder("forms")
    x = b.input("x", 6)
    weight = b.constant("w", np.random.default_rng(2).uniform(-1, 1, (6, 6)))
    h = b.node(Op.LINEAR, "hidden", [x, weight], activation=Activation(Op.SOFTPLUS, {"beta": 2.0, "threshold": 1.0}))
    outputs = [
        b.node(Op.SILU, "silu", [h]),
        b.node(Op.SOFTPLUS, "beta_only", [x], beta=0.5),
        b.node(Op.CLIP, "clip_max", [x], min=None, max=0.25),
        b.node(Op.CLIP, "clip_both", [x], min=-0.5, max=0.5),
        b.node(Op.GELU, "gelu_tanh", [x], approximate="tanh"),
        b.node(Op.CAST, "cast", [b.node(Op.GREATER, "positive", [x, b.constant("zero", 0.0)])], to="f32"),
        b.node(Op.SLICE, "backwards", [x], axis=1, start=4, stop=-1, step=-2),
    ]
    cube = b.node(Op.RESHAPE, "cube", [h], shape=(None, 2, 3))
    outputs.append(b.node(Op.LINEAR, "rank3", [cube, b.constant("w3", np.ones((4, 3))), b.constant("b3", np.ones(4))],
                          activation=Activation(Op.TANH)))
    outputs.append(b.node(Op.REDUCE_MAX, "peak", [cube], axes=(2,), keepdims=False))
    scale, shift = b.constant("scale", np.full(6, 2.0)), b.constant("shift", np.ones(6))
    outputs.append(b.node(Op.LAYER_NORM, "norm", [x, scale, shift], axis=-1, epsilon=1e-5))
    outputs.append(b.node(Op.NOT, "not_positive", ["positive"]))
    return b.graph(outputs)


def test_operator_forms_onnx_lacks_round_trip(tmp_path):
    _round_trip(prepare(_special_forms(), backend="numpy"), tmp_path)


@pytest.mark.parametrize("path", ZOO, ids=zoo_ids())
def test_zoo_round_trip(tmp_path, path):
    with coopnn.load(path, backend="numpy") as model:
        _round_trip(model, tmp_path)


def test_trained_weights_are_exported(tmp_path):
    model = coopnn.mlp(2, [8], 1, backend="numpy")
    x = np.random.default_rng(0).uniform(0, 1, (64, 2)).astype(np.float32)
    coopnn.Trainer(model, optimizer=coopnn.optim.Adam(lr=0.1)).fit(x, x[:, :1] * x[:, 1:], steps=5, progress=False)
    _round_trip(model, tmp_path)


def test_output_that_no_node_computes_is_refused():
    b = GraphBuilder("passthrough")
    x = b.input("x", 2)
    with pytest.raises(CompileError, match="output 'x' .* is not computed by any node"):
        export_onnx(b.graph([x]))
