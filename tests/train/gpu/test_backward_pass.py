"""`backward_pass.backward` on lavapipe (portable sessions): the upstream-gradient loss's gradients against the numpy
oracle's, the input's gradient written by the step kernel, and its refusal by name behind an input stage."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn import backends
from coopnn.errors import CompileError
from coopnn.train.backward import GradientProgram
from coopnn.train.gpu.backward_pass import backward, writes_input_gradient
from coopnn.train.losses import UpstreamGradient
from coopnn.train.optim import SGD

pytestmark = pytest.mark.vulkan


def _session(model):
    return backends.training_backend("portable").prepare_training(model.graph, UpstreamGradient(), SGD(lr=0.0),
                                                                   device=None)


def test_gradients_of_the_upstream_loss(require_vulkan):
    rng = np.random.default_rng(0)
    x, upstream = rng.uniform(-1, 1, (33, 4)).astype(np.float32), rng.normal(size=(33, 2)).astype(np.float32)
    with coopnn.mlp(4, [8, 8], 2, activation="tanh", backend="portable", seed=1) as model:
        session = _session(model)
        assert writes_input_gradient(session)
        got, rows = backward(session, {"x": x}, upstream, True)
        session.close()
        # the numpy oracle's reverse mode, given the same gradient in the output
        program = GradientProgram(model.graph)
        want = program.backward(program.forward({"x": x}, model.graph.constants), {"y": upstream})
    assert set(want) == set(got)
    for name, gradient in want.items():
        np.testing.assert_allclose(got[name], gradient, rtol=1e-4, atol=1e-5, err_msg=name)
    assert rows.shape == (33, 4) and np.isfinite(rows).all()


def test_input_gradients_behind_an_input_stage_are_refused(require_vulkan):
    with coopnn.mlp(3, [8], 2, encoding="frequency", octaves=2, backend="portable", seed=2) as model:
        session = _session(model)
        assert not writes_input_gradient(session)
        x, upstream = np.zeros((4, 3), np.float32), np.ones((4, 2), np.float32)
        with pytest.raises(CompileError, match="does not write gradients in the network's input"):
            backward(session, {"x": x}, upstream, True)
        gradients, rows = backward(session, {"x": x}, upstream, False)
        assert rows is None and set(gradients) == set(model.parameters()) - {"encoding.frequencies"}
        session.close()
