"""What the H100's driver reports about coopnn's kernels (VK_KHR_pipeline_executable_properties): needs a GPU with
cooperative vectors whose driver has the extension."""

from __future__ import annotations

import pytest

import coopnn
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu


@pytest.fixture
def reporting_device(coopvec_device):
    from coopnn.runtime.vk.context import list_devices
    from coopnn.runtime.vk.pipeline_statistics import FEATURE
    from coopnn.runtime.vk.selection import select_device

    if not select_device(list_devices()).features.get(FEATURE):
        pytest.skip("the driver lacks VK_KHR_pipeline_executable_properties")


def test_the_inference_and_training_kernels_are_reported(reporting_device):
    with coopnn.load(ROOT / "models" / "mlp_32_64x4_16.onnx", backend="coopvec", weights="fp16") as model:
        (inference,) = model.kernel_statistics()
        training = coopnn.Trainer(model).kernel_statistics()
    assert inference.kernel == "mlp_32_64x4_16" and inference.workgroup_size == (64, 1, 1)
    assert inference.executables and all(e.subgroup_size == 32 for e in inference.executables)
    assert inference.values() and all(isinstance(v, (bool, int, float)) for v in inference.values().values())
    names = [k.kernel for k in training]
    assert names[0] == "step" and {"optimizer", "loss tile"} <= set(names)
    assert any(n.startswith("gradients ") for n in names) and all(k.executables for k in training)
