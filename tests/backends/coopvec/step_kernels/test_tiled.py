"""The tiled step kernel's blocked copy made from a working copy written from outside the optimizer
(`TiledStep.refresh_steps`, `blocked_copy_shader`): spirv-val, and on a Vulkan device (lavapipe in CI, validation on
where installed) the scatter `blocked[block_index] = working` the optimizer does."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import BackendUnavailableError
from coopnn.shaders.training.blocked_copy import blocked_copy_shader
from coopnn.shaders.training.layout import ParameterLayout
from tests.backends.portable.test_target import spirv_val
from tests.devices import Kernel


def test_the_blocked_copy_shader_validates(tmp_path):
    spirv_val(blocked_copy_shader().spirv, tmp_path)


@pytest.mark.vulkan
def test_the_blocked_copy_rearranges_the_working_copy_as_the_optimizer_does(make_context):
    shader = blocked_copy_shader()
    try:
        context = make_context(features=shader.features)
    except BackendUnavailableError as exc:
        pytest.skip(str(exc))
    layout = ParameterLayout.of([("w0", "b0", 32, 48), ("w1", "b1", 16, 32), ("w2", "b2", 16, 16)])
    order = layout.block_index(16)
    working = np.random.default_rng(1).standard_normal(layout.size).astype(np.float16)
    want = np.empty_like(working)
    want[order] = working
    kernel = Kernel(context, shader, [working, order, np.full_like(working, np.nan)])
    _, _, blocked = kernel.run(shader.pack_push(count=layout.size), layout.size)
    np.testing.assert_array_equal(blocked, want)
