"""A model whose kernel holds constants that are no parameter (gelu_silu_mlp: GELU written out with its coefficients
as graph constants) trains on the per-sample step kernel (a GPU with VK_NV_cooperative_vector): its constants reach
the TrainingOptimal image once, its parameters after every step, and the steps match the numpy oracle."""

from __future__ import annotations

import pytest

import coopnn
from coopnn.backends.coopvec.training import CoopvecTrainingSession
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam
from tests.backends.coopvec.oracle import assert_matches_on_random_data, rounded
from tests.conftest import ROOT

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]


def test_a_model_with_constant_vectors_trains_on_the_per_sample_step():
    graph = rounded(coopnn.load(ROOT / "models" / "gelu_silu_mlp.onnx", backend="numpy").graph)
    session = CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None, step="coopvec")
    assert_matches_on_random_data(session, graph, "l2", 8, 4, 256)
