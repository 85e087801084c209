"""What the coopvec training session decides before it opens a device: the step kernel "auto" takes, and the layout
its tape keeps deltas in."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from coopnn.backends.coopvec.training import (AUTO_TILED_FROM_LAYERS, SAMPLE_MAJOR_DELTAS_FROM_LAYERS,
                                              CoopvecTrainingSession)
from coopnn.nets.builders import mlp_graph
from coopnn.train.gpu.plan import plan_training
from coopnn.train.losses import get_loss


@pytest.mark.parametrize("gradients, layers, step, deltas", [
    ("coopmat", SAMPLE_MAJOR_DELTAS_FROM_LAYERS, "coopvec", "samples"),
    ("coopmat", SAMPLE_MAJOR_DELTAS_FROM_LAYERS - 1, "coopvec", "features"),
    ("coopmat", SAMPLE_MAJOR_DELTAS_FROM_LAYERS - 1, "tiled", "samples"),
    ("coopvec", SAMPLE_MAJOR_DELTAS_FROM_LAYERS + 1, "coopvec", "features"),
    ("coopvec", SAMPLE_MAJOR_DELTAS_FROM_LAYERS + 1, "tiled", "features"),
    ("outer_product", SAMPLE_MAJOR_DELTAS_FROM_LAYERS + 1, "coopvec", "features"),
])
def test_deltas_are_sample_major_for_cooperative_matrix_gradients_of_deep_models_or_the_tiled_step(
        gradients, layers, step, deltas):
    session = SimpleNamespace(gradient_method=gradients, step_method=step,
                              plan=SimpleNamespace(layers=[None] * layers))
    assert CoopvecTrainingSession.delta_layout(session) == deltas


def _auto_step(hidden, width=64, loss="l2"):
    graph = mlp_graph(3, [width] * hidden, 3, activation="relu")
    return CoopvecTrainingSession.auto_step(SimpleNamespace(plan=plan_training(graph), loss_function=get_loss(loss)))


def test_auto_takes_the_tiled_step_for_deep_models():
    assert _auto_step(AUTO_TILED_FROM_LAYERS - 1) == "tiled"
    assert _auto_step(AUTO_TILED_FROM_LAYERS - 2) == "coopvec"


def test_auto_takes_the_per_sample_step_where_the_tiled_one_cannot_train():
    assert _auto_step(AUTO_TILED_FROM_LAYERS, width=512) == "coopvec"  # more than 48 KB of workgroup memory
