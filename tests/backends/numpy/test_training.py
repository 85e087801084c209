"""The numpy training session: fp32 master weights kept apart from the graph, gradients, and state in and out."""

from __future__ import annotations

import numpy as np

from coopnn.nets.builders import mlp_graph
from coopnn.train.losses import get_loss
from coopnn.backends.numpy.backend import NumpyBackend
from coopnn.train.optim import SGD

rng = np.random.default_rng(4)
FEEDS = {"x": rng.uniform(-1, 1, (32, 2)).astype(np.float32)}
TARGETS = {"y": rng.uniform(-1, 1, (32, 1)).astype(np.float32)}


def _session(lr=0.1):
    graph = mlp_graph(2, [8], 1, activation="tanh")
    return graph, NumpyBackend().prepare_training(graph, get_loss("l2"), SGD(lr=lr), device=None)


def test_step_is_sgd_on_the_analytic_gradient():
    graph, session = _session()
    start = session.parameters()
    loss, gradients = session.loss_and_gradients(FEEDS, TARGETS)
    assert session.loss(FEEDS, TARGETS) == loss
    assert session.step(FEEDS, TARGETS) == loss
    for name, array in session.parameters().items():
        assert array.dtype == np.float32
        np.testing.assert_allclose(array, start[name] - 0.1 * gradients[name], rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(graph.constants["layers.0.weight"], start["layers.0.weight"])  # graph untouched


def test_parameters_are_copies_and_load_parameters_restores():
    _, session = _session()
    start = session.parameters()
    start["layers.0.bias"][:] = 99
    assert not np.any(session.parameters()["layers.0.bias"] == 99)
    saved = session.parameters()
    session.step(FEEDS, TARGETS)
    session.load_parameters(saved)
    for name, array in saved.items():
        np.testing.assert_array_equal(session.parameters()[name], array)


def test_optimizer_state_goes_through_the_session():
    _, session = _session()
    session.step(FEEDS, TARGETS)
    state = session.optimizer_state()
    assert state["type"] == "sgd" and state["step"] == 1
    _, other = _session(lr=0.5)
    other.load_optimizer_state(state)
    assert other.optimizer_state()["hyperparameters"]["lr"] == 0.1
