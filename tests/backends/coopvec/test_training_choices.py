"""What the coopvec training session decides before it opens a device: the layout its tape keeps deltas in."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from coopnn.backends.coopvec.training import SAMPLE_MAJOR_DELTAS_FROM_LAYERS, CoopvecTrainingSession


@pytest.mark.parametrize("gradients, layers, deltas", [
    ("coopmat", SAMPLE_MAJOR_DELTAS_FROM_LAYERS, "samples"),
    ("coopmat", SAMPLE_MAJOR_DELTAS_FROM_LAYERS - 1, "features"),
    ("coopvec", SAMPLE_MAJOR_DELTAS_FROM_LAYERS + 1, "features"),
    ("outer_product", SAMPLE_MAJOR_DELTAS_FROM_LAYERS + 1, "features"),
])
def test_deltas_are_sample_major_only_for_cooperative_matrix_gradients_of_deep_models(gradients, layers, deltas):
    session = SimpleNamespace(gradient_method=gradients, plan=SimpleNamespace(layers=[None] * layers))
    assert CoopvecTrainingSession.delta_layout(session) == deltas
