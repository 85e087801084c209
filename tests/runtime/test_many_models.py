"""Loading and closing many models in one process keeps working (NVIDIA's driver once failed after ~27)."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from tests.conftest import ROOT
from tests.devices import vulkan_skip_reason

pytestmark = pytest.mark.vulkan


def test_sixty_models_loaded_and_closed_one_after_another():
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)
    x = np.zeros((4, 3), np.float32)
    for _ in range(60):
        with coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx", backend="portable") as model:
            assert model.run(x).shape == (4, 3)
