"""The PyTorch interpreter of the graph IR: a rule for every operator that agrees with the numpy semantics, and the
whole zoo agreeing with the numpy reference in float32."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.bench.models import BenchModel
from coopnn.graph import ops
from coopnn.graph.activations import ACTIVATIONS
from coopnn.graph.encodings.registry import from_config
from coopnn.graph.ir import Activation, Op
from coopnn.backends.numpy.inference import run_graph
from tests.conftest import ROOT, ZOO, import_torch
from tests.tl.functions.examples import SOFTPLUS

torch = import_torch()
from coopnn.bench.torch_graph import COVERED, TorchGraph  # noqa: E402

rng = np.random.default_rng(0)


def f(*shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, shape).astype(np.float32)


def b(*shape):
    return rng.random(shape) > 0.5


X = f(4, 6)
POSITIVE = f(4, 6, low=0.1, high=3.0)
GRID = from_config({"otype": "HashGrid", "n_levels": 2, "log2_hashmap_size": 4}, 2)
UNARY_DEFAULTS = [op for op, d in ops.REGISTRY.items()
                  if d.kind == "unary" and op not in (Op.NOT, Op.CAST) and not (op in ACTIVATIONS and ACTIVATIONS[op].required)]
# (op, inputs, attrs): every operator at least once, attribute variants where the semantics branch on them
CASES = [(op, [POSITIVE if op in (Op.LOG, Op.SQRT) else X], {}) for op in UNARY_DEFAULTS] + [
    (Op.TL_FUNCTION, [X], {"text": SOFTPLUS, "function": None, "derivative": None}),
    (Op.LEAKY_RELU, [X], {"alpha": 0.2}),
    (Op.ELU, [X], {"alpha": 0.7}),
    (Op.SELU, [X], {"alpha": 1.5, "gamma": 1.1}),
    (Op.CELU, [X], {"alpha": 0.5}),
    (Op.HARD_SIGMOID, [X], {"alpha": 1 / 6, "beta": 0.5}),
    (Op.GELU, [X], {"approximate": "tanh"}),
    (Op.SOFTPLUS, [X], {"beta": 2.0, "threshold": 1.0}),
    (Op.SOFTPLUS, [X], {"beta": 100.0, "threshold": 20.0}),
    (Op.CLIP, [X], {"min": -0.5, "max": 0.5}),
    (Op.CLIP, [X], {"min": 0.0}),
    (Op.NOT, [b(4, 6)], {}),
    (Op.ADD, [X, f(6)], {}),
    (Op.SUB, [X, f(1, 6)], {}),
    (Op.MUL, [X, np.float32(3)], {}),
    (Op.DIV, [X, f(4, 6, low=0.5, high=2.0)], {}),
    (Op.POW, [POSITIVE, np.float32(1.5)], {}),
    (Op.MAX, [X, f(4, 6)], {}),
    (Op.MIN, [X, f(4, 6)], {}),
    (Op.PRELU, [X, f(1, 6)], {}),
    (Op.WHERE, [b(4, 6), X, np.float32(0)], {}),
    (Op.LINEAR, [X, f(3, 6), f(3)], {}),
    (Op.LINEAR, [f(4, 2, 6), f(3, 6), f(1, 3)], {"activation": Activation(Op.SOFTPLUS, {"beta": 2.0})}),
    (Op.LINEAR, [X, f(3, 6)], {"activation": Activation(Op.RELU)}),
    (Op.MATMUL, [X, f(6, 3)], {}),
    (Op.GEMM, [X, f(3, 6), f(3)], {"alpha": 0.5, "beta": 2.0, "trans_b": 1}),
    (Op.GEMM, [f(6, 4), f(6, 3)], {"trans_a": 1}),
    (Op.CAST, [X], {"to": "bool"}),
    (Op.CAST, [b(4, 6)], {"to": "f32"}),
    (Op.CONCAT, [X, f(4, 2), X], {"axis": 1}),
    (Op.SLICE, [X], {"axis": 1, "start": 1, "stop": 5, "step": 2}),
    (Op.SLICE, [f(4, 3, 6)], {"axis": 2, "start": 2, "stop": 9223372036854775807, "step": 1}),
    (Op.RESHAPE, [X], {"shape": (None, 2, 3)}),
    (Op.TRANSPOSE, [f(4, 2, 3)], {"perm": (0, 2, 1)}),
    (Op.SOFTMAX, [X], {"axis": -1}),
    (Op.LOG_SOFTMAX, [f(4, 2, 3)], {"axis": 1}),
    (Op.LAYER_NORM, [X, f(6), f(6)], {"axis": -1, "epsilon": 1e-5}),
    (Op.LAYER_NORM, [f(4, 2, 3), f(1, 2, 3)], {"axis": 1, "epsilon": 1e-3}),
] + [(op, [f(4, 2, 3)], {"axes": (1,), "keepdims": k}) for op in
     (Op.REDUCE_SUM, Op.REDUCE_MEAN, Op.REDUCE_MAX, Op.REDUCE_MIN) for k in (0, 1)] + [
    (op, [np.round(X), np.round(f(4, 6))], {}) for op in
    (Op.LESS, Op.LESS_EQUAL, Op.GREATER, Op.GREATER_EQUAL, Op.EQUAL)] + [
    (op, [b(4, 6), b(4, 6)], {}) for op in (Op.AND, Op.OR, Op.XOR)] + [
    (Op.ENCODING, [f(4, 2), f(GRID.n_parameters)], {"encoding": GRID})]


@pytest.fixture(scope="module")
def rules():
    return TorchGraph(BenchModel.load(ROOT / "models" / "mlp_3_64x2_3.onnx").graph, torch.float32, "cpu").rules


def test_every_operator_has_a_rule_and_a_case():
    assert COVERED == set(Op)
    assert {op for op, _, _ in CASES} == set(Op)


@pytest.mark.parametrize("op, inputs, attrs", CASES, ids=[f"{c[0].value}-{i}" for i, c in enumerate(CASES)])
def test_rule_matches_numpy_semantics(rules, op, inputs, attrs):
    want = ops.evaluate(op, inputs, attrs)
    got = rules[op](*(torch.from_numpy(np.array(a)) for a in inputs), **attrs).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_matches_the_numpy_reference(path):
    model = BenchModel.load(path)
    feeds = model.feeds(64, seed=1)
    want = run_graph(model.graph, feeds)
    with torch.no_grad():
        got = TorchGraph(model.graph, torch.float32, "cpu")({k: torch.from_numpy(v) for k, v in feeds.items()})
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name].numpy(), want[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_half_precision_keeps_booleans_and_casts_constants():
    model = BenchModel.load(ROOT / "models" / "piecewise_where.onnx")
    program = TorchGraph(model.graph, torch.float16, "cpu")
    dtypes = {t.dtype for t in program.constants.values()}
    assert dtypes <= {torch.float16, torch.bool} and torch.float16 in dtypes
