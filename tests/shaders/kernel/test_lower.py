"""Lowering graph IR to kernel programs: the kernel interpreter must reproduce the numpy backend on every model."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.graph.ir import Graph, Node, Op, Value
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.backends.numpy.inference import run_graph
from coopnn.shaders.kernel.interpret import run_program
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.kernel.printer import print_program
from tests.conftest import ZOO


def _feeds(graph: Graph, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v.name: rng.uniform(-3, 3, (batch,) + v.features).astype(np.float32) for v in graph.inputs}


def _check(graph: Graph, batch: int = 33) -> None:
    feeds = _feeds(graph, batch)
    want = run_graph(graph, feeds)
    got = run_program(lower(graph), feeds)
    for name, w in want.items():
        np.testing.assert_allclose(got[name].reshape(w.shape), w, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_lowers_and_matches_the_graph(path):
    _check(optimize(import_model(path)))


def _unary_graph(op: Op, attrs: dict, features=(5,)) -> Graph:
    x = Value("x", "f32", (None,) + features)
    y = Value("y", "f32", (None,) + features)
    node = Node(op, "n0", ("x",), ("y",), attrs)
    return Graph("g", (x,), (y,), (node,), {"x": x, "y": y}, {})


UNARY = [
    (Op.RELU, {}), (Op.LEAKY_RELU, {"alpha": 0.1}), (Op.LEAKY_RELU, {"alpha": 2.0}), (Op.ELU, {"alpha": 0.7}),
    (Op.SELU, {}), (Op.CELU, {"alpha": 1.3}), (Op.SIGMOID, {}), (Op.HARD_SIGMOID, {"alpha": 0.3, "beta": 0.4}),
    (Op.HARD_SWISH, {}), (Op.TANH, {}), (Op.SOFTPLUS, {}), (Op.SOFTPLUS, {"beta": 2.0, "threshold": 5.0}),
    (Op.SOFTSIGN, {}), (Op.GELU, {}), (Op.GELU, {"approximate": "tanh"}), (Op.SILU, {}), (Op.MISH, {}),
    (Op.CLIP, {"min": -0.5, "max": 1.5}), (Op.EXP, {}), (Op.SIN, {}), (Op.COS, {}), (Op.NEG, {}), (Op.ABS, {}),
    (Op.ERF, {}), (Op.FLOOR, {}), (Op.CEIL, {}), (Op.SIGN, {}), (Op.IDENTITY, {}), (Op.RECIPROCAL, {}),
]


@pytest.mark.parametrize("op, attrs", UNARY, ids=lambda v: v.value if isinstance(v, Op) else str(v))
def test_unary_expansions_match_the_reference(op, attrs):
    _check(_unary_graph(op, attrs, (4, 6)), batch=257)


def test_unary_expansions_extreme_inputs():
    for op, attrs in UNARY:
        graph = _unary_graph(op, attrs, (6,))
        feeds = {"x": np.array([[-90.0, -20.0, -1e-4, 0.0, 30.0, 89.0]], np.float32)}
        want = run_graph(graph, feeds)["y"]
        got = run_program(lower(graph), feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=op.value)


def test_text_form_is_tensor_language_with_coopvectors():
    graph = optimize(import_model(next(p for p in ZOO if p.stem == "mlp_3_64x2_3")))
    text = print_program(lower(graph))
    assert text.startswith("; kernel") and "func @" in text and "foreach (%i) = (%c0), (%n) {" in text
    assert "gemv.n %w" in text and ": coopvector<f32x64>" in text and "memref<f32x64x3>" in text
    assert text.count("gemv.n") == 3 and "store %" in text
