"""A model whose kernel reads weights the training plan does not train (gelu_silu_mlp: the plan takes its layers
before a GELU written out of elementwise operations as a fixed input stage) is refused by the per-sample step kernel
with a CompileError naming them (a GPU with VK_NV_cooperative_vector), rather than a raw KeyError."""

from __future__ import annotations

import pytest

import coopnn
from coopnn.backends.coopvec.training import CoopvecTrainingSession
from coopnn.errors import CompileError
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam
from tests.conftest import ROOT

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]


def test_a_model_with_constant_vectors_is_refused_by_the_per_sample_step():
    graph = coopnn.load(ROOT / "models" / "gelu_silu_mlp.onnx", backend="numpy").graph
    with pytest.raises(CompileError, match="not among the parameters it trains"):
        CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None, step="coopvec")
