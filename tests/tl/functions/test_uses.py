"""The three uses on the numpy backend (the tl interpreter) against hand-written numpy: an activation with its
derivative given and one differentiated, an encoding and its input gradient, a loss and its derivative; and the
ONNX export refusing them."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn import tl
from coopnn.errors import CompileError
from coopnn.graph.encodings.registry import from_config
from coopnn.graph.ir import Op
from coopnn.graph.onnx.export import export_onnx
from coopnn.train.activation_grads import derivative
from tests.tl.functions import examples

RTOL, ATOL = 1e-4, 1e-5
X = np.random.default_rng(7).uniform(-4, 4, (257, 3)).astype(np.float32)


@pytest.mark.parametrize("text, derivative_name, forward, slope", [
    (examples.SOFTPLUS, "logistic", examples.softplus, examples.logistic),
    (examples.SOFTPLUS, None, examples.softplus, examples.logistic),
    (examples.WAVE, None, examples.wave, examples.wave_slope),
], ids=["softplus-rule", "softplus-derived", "wave-derived"])
def test_activation_and_its_derivative(text, derivative_name, forward, slope):
    attrs = tl.activation(text, derivative=derivative_name).attrs
    y = coopnn.graph.ops.evaluate(Op.TL_FUNCTION, [X], attrs)
    np.testing.assert_allclose(y, forward(X), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(derivative(Op.TL_FUNCTION, X, y, attrs), slope(X), rtol=RTOL, atol=ATOL)


def test_an_mlp_with_a_tl_activation_runs_as_the_builtin_one():
    with coopnn.mlp(3, [16, 16], 2, activation=tl.activation(examples.SOFTPLUS), backend="numpy", seed=4) as mine, \
            coopnn.mlp(3, [16, 16], 2, activation="softplus", backend="numpy", seed=4) as builtin:
        np.testing.assert_allclose(mine(X), builtin(X), rtol=RTOL, atol=ATOL)


def test_encoding_and_its_input_gradient():
    encoding = from_config(tl.encoding(examples.FEATURES), 2)
    x = X[:, :2]
    assert (encoding.n_input_dims, encoding.n_output_dims, encoding.n_parameters) == (2, 5, 0)
    np.testing.assert_allclose(encoding.forward(x, None), examples.features(x), rtol=RTOL, atol=ATOL)
    dy = np.random.default_rng(2).normal(size=(len(x), 5)).astype(np.float32)
    a, b = x[:, 0].astype(np.float64), x[:, 1].astype(np.float64)
    jacobian_a = [np.cos(a), 0 * a, b, np.full_like(a, 1 / (3 * np.log(2))), 0 * a]
    jacobian_b = [0 * b, -np.sin(b), a, 0 * b, np.where(np.abs(b) > 3, 0, np.sign(b))]
    want = np.stack([(dy * np.stack(j, axis=1)).sum(axis=1) for j in (jacobian_a, jacobian_b)], axis=1)
    np.testing.assert_allclose(encoding.backward(x, None, dy)[1], want, rtol=RTOL, atol=ATOL)
    assert from_config(encoding.to_config(), 2) == encoding


def test_an_mlp_behind_a_tl_encoding():
    with coopnn.mlp(2, [8], 1, encoding=tl.encoding(examples.FEATURES), backend="numpy") as model:
        assert model.graph.nodes[0].attrs["encoding"].describe() == "TensorLanguage(@features)"
        assert model(X[:, :2]).shape == (len(X), 1)


@pytest.mark.parametrize("text, derivative_name, forward, slope", [
    (examples.LOG_COSH, None, examples.log_cosh, examples.log_cosh_slope),
    (examples.SOFTPLUS_LOSS, "logistic_difference", lambda p, t: examples.softplus(p - t),
     lambda p, t: examples.logistic(p - t)),
], ids=["log_cosh-derived", "softplus-rule"])
def test_loss_terms(text, derivative_name, forward, slope):
    loss = tl.loss(text, derivative=derivative_name)
    p, t = X[:, :2], X[:, 1:]
    values, derivatives = loss.terms(p, t)
    np.testing.assert_allclose(values, forward(p, t), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(derivatives, slope(p, t), rtol=RTOL, atol=ATOL)
    assert coopnn.train.losses.get_loss("tl", **loss.options()) == loss  # as a checkpoint restores it


def test_training_on_numpy_lowers_the_loss():
    x = X[:, :2] / 4
    y = np.sin(3 * x[:, :1]) * x[:, 1:]
    with coopnn.mlp(2, [16], 1, activation=tl.activation(examples.WAVE), encoding=tl.encoding(examples.FEATURES),
                    backend="numpy", seed=1) as model:
        losses = coopnn.Trainer(model, tl.loss(examples.LOG_COSH)).fit(x, y, steps=30, progress=False)
    assert losses[-1] < losses[0]


def test_onnx_export_refuses_a_tl_function():
    with coopnn.mlp(3, [4], 1, activation=tl.activation(examples.SOFTPLUS), backend="numpy") as model:
        with pytest.raises(CompileError, match="'layers.0/tl_function'.*has no ONNX form"):
            export_onnx(model.graph)
    with coopnn.mlp(2, [4], 1, encoding=tl.encoding(examples.FEATURES), backend="numpy") as model:
        with pytest.raises(CompileError, match="the encoding TensorLanguage has no ONNX form"):
            export_onnx(model.graph)
