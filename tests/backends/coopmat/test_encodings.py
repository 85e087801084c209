"""Encoded models on the coopmat backend (a GPU with VK_KHR_cooperative_matrix): every encoding test model, its
encoding run per sample before the first product, against the float16 reference (`encoding_cases.fp16_reference`)."""

from __future__ import annotations

import pytest

from tests.shaders.targets.encoding_cases import EVERY, EVERY_IDS, assert_matches_fp16_reference

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopmat_device")]


@pytest.mark.parametrize("config, n_in", EVERY, ids=EVERY_IDS)
def test_encoded_model_matches_the_fp16_reference(config, n_in):
    assert_matches_fp16_reference(config, n_in, "coopmat")
