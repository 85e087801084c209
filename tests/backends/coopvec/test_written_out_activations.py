"""On a GPU with VK_NV_cooperative_vector: gelu_silu_mlp, whose GELUs (exact and tanh) and SiLU its exporter wrote out
in arithmetic, trains every one of its layers with each step kernel, as the numpy oracle does (the training plan once
took the layers before those activations for a fixed input stage and trained the last layer only)."""

from __future__ import annotations

import pytest

import coopnn
from coopnn.backends.coopvec.training import CoopvecTrainingSession
from coopnn.graph.parameters import parameters
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam
from tests.backends.coopvec.oracle import assert_matches_on_random_data, rounded
from tests.conftest import ROOT

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]


@pytest.mark.parametrize("step", ["coopvec", "tiled"])
@pytest.mark.parametrize("name", ["gelu_silu_mlp", "gelu_silu_opset20"])
def test_every_layer_trains_like_the_oracle(name, step):
    with coopnn.load(ROOT / "models" / f"{name}.onnx", backend="numpy") as model:
        graph = rounded(model.graph)
    session = CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None, step=step)
    assert_matches_on_random_data(session, graph, "l2", inputs=8, outputs=4, samples=1000)  # closes the session
    assert session.step_method.name == step
    trained = {name for layer in session.plan.layers for name in (layer.weight, layer.bias)}
    assert trained == set(parameters(graph))
