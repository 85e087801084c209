"""The coopvec member of `coopnn.torch.sync` on a cooperative-vector GPU (no CUDA needed: the float16 mirror is a
Vulkan buffer here): the driver's conversion of the mirror into the kernel's InferencingOptimal weights, checked by
running the kernel against the float16 emulation of the model with the new parameters."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.graph.parameters import with_parameters
from coopnn.layouts.formats.emulation import run_fp16_emulation
from coopnn.runtime.vk.memory import HostAccess
from tests.conftest import import_torch

torch = import_torch()  # before coopnn.torch, which imports it
from coopnn.torch import sync  # noqa: E402
from coopnn.torch.flat_layout import FlatLayout  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]


class VulkanMirror:
    """Stands in for `MasterWeights`: the float16 mirror in a Vulkan buffer with a device address, written by the
    host."""

    def __init__(self, executable, values):
        self.layout = FlatLayout.of({name: array.shape for name, array in values.items()})
        flat = self.layout.flatten(values).astype(np.float16)
        self.mirror_buffer = executable.context.create_buffer(flat.nbytes, HostAccess.WRITE, device_address=True)
        self.mirror_buffer.upload(flat)


@pytest.mark.parametrize("widths", [(3, [64, 64], 3), (32, [64, 64, 64, 64], 16), (5, [24], 7)],
                         ids=["mlp_3", "mlp_32", "odd widths"])
def test_the_conversion_writes_the_mirror_into_the_weights(widths):
    n_in, hidden, n_out = widths
    with coopnn.mlp(n_in, hidden, n_out, backend="coopvec", weights="fp16", seed=5) as model:
        executable = model._current_executable()
        held = sync.held_parameters(executable, model.graph)
        rng = np.random.default_rng(6)
        # new values at the scale of the initial ones: uniform(-0.5, 0.5) made activations of 10 and more, where the
        # driver's float16 accumulation parts from the emulation by more than the tolerance
        values = {name: (a + rng.uniform(-0.1, 0.1, a.shape)).astype(np.float32)
                  for name, a in model.parameters().items()}
        master = VulkanMirror(executable, values)
        prologue = sync.member("coopvec").prologue(executable, master, held)
        assert prologue is not None and prologue.buffers == (master.mirror_buffer,)
        executable.context.submit(prologue.record)
        x = rng.uniform(-1, 1, (300, n_in)).astype(np.float32)
        got = executable.run({"x": x})["y"]
        want = run_fp16_emulation(with_parameters(model.graph, values), {"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=2.5e-3)
