"""Encoded models on the coopmat backend (a GPU with VK_KHR_cooperative_matrix): every encoding test model, its
encoding run per sample before the first product, against the float16 reference (`encoding_cases.fp16_reference`)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.shaders.targets.encoding_cases import EVERY, EVERY_IDS, fp16_reference, inputs, kernel_model

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopmat_device")]
RTOL, ATOL = 1e-3, 2.5e-3


@pytest.mark.parametrize("config, n_in", EVERY, ids=EVERY_IDS)
def test_encoded_model_matches_the_fp16_reference(config, n_in):
    model, _ = kernel_model(config, n_in, "coopmat")
    with model:
        assert model.backend == "coopmat"
        x = inputs(config, n_in)
        np.testing.assert_allclose(model.run(x), fp16_reference(model.graph, x), rtol=RTOL, atol=ATOL)
