"""Helpers for the ONNX importer tests: build small models with onnx.helper and check an import against onnxruntime.

This folder has no __init__.py on purpose: should tests/graph ever lose its own, a package here would be named `onnx`
and hide the real onnx package. Its test modules are therefore imported by file name (kept distinct from other
folders' names), and helpers are fixtures (`onnx_model`, `check_import`) rather than an importable module.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from coopnn.graph.ir import Graph
from coopnn.graph.onnx import import_model
from coopnn.graph.verify import verify
from coopnn.backends.numpy.inference import run_graph

RTOL = 1e-4
ATOL = 1e-5
BATCH = 7


def build_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, Sequence[int | str | None]],
    outputs: Sequence[str] | Mapping[str, Sequence[int | str]],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 13,
    input_type: int = TensorProto.FLOAT,
) -> onnx.ModelProto:
    """A model of `nodes`; shapes may use "N" for the batch. Outputs given by name get their types from ONNX shape
    inference; outputs given with a shape (where inference cannot follow, e.g. computed Reshape targets) are float."""
    declared = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, list(outputs[name]))
        if isinstance(outputs, Mapping) else onnx.ValueInfoProto(name=name)
        for name in outputs
    ]
    graph = helper.make_graph(
        list(nodes),
        "test",
        [helper.make_tensor_value_info(name, input_type, list(shape)) for name, shape in inputs.items()],
        declared,
        [numpy_helper.from_array(np.asarray(a), name) for name, a in (initializers or {}).items()],
    )
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


def random_feeds(graph: Graph, batch: int = BATCH, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of order one for every graph input: floats in [-2, 2], booleans at random."""
    rng = np.random.default_rng(seed)
    return {
        v.name: (rng.random((batch, *v.features)) < 0.5) if v.dtype == "bool"
        else rng.uniform(-2, 2, (batch, *v.features)).astype(np.float32)
        for v in graph.inputs
    }


def ort_outputs(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds))))


def check_against_ort(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray] | None = None,
                      rtol: float = RTOL, atol: float = ATOL) -> Graph:
    """Import `model`, verify the graph, and compare run_graph with onnxruntime on every output; return the graph."""
    graph = verify(import_model(model))
    feeds = dict(random_feeds(graph) if feeds is None else feeds)
    expected = ort_outputs(model, feeds)
    got = run_graph(graph, feeds)
    assert [v.name for v in graph.outputs] == list(expected)
    for name, want in expected.items():
        assert got[name].shape == want.shape, name
        if want.dtype == np.bool_:
            np.testing.assert_array_equal(got[name], want, err_msg=name)
        else:
            np.testing.assert_allclose(got[name], want.astype(np.float32), rtol=rtol, atol=atol, err_msg=name)
    return graph


@pytest.fixture
def onnx_model() -> Callable[..., onnx.ModelProto]:
    return build_model


@pytest.fixture
def check_import() -> Callable[..., Graph]:
    return check_against_ort
