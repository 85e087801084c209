"""`ForwardRunner` on lavapipe without CUDA: the bridge is stood in for by the host path and the shared vector by a
Vulkan buffer the stand-in fills from a CPU tensor before each run (as shared memory would hold it). Checked: no
refresh while the parameters are unchanged, the GPU refresh once they changed (zero biases included: each has an
entry of its own), the host refresh where no member writes the weights, a refresh kept past an empty batch (which
dispatches nothing), all against the numpy backend."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.runtime.vk.memory import HostAccess
from tests.conftest import import_torch

torch = import_torch()  # before coopnn.torch, which imports it
from coopnn.torch import forward, sync  # noqa: E402
from coopnn.torch.flat_layout import FlatLayout  # noqa: E402

pytestmark = pytest.mark.vulkan


class CpuMaster:
    """Stands in for `MasterWeights`: a CPU tensor, and a Vulkan buffer mirroring it in a scope of the model's
    shared context of its own (the model is prepared anew under it)."""

    def __init__(self, model):
        from coopnn.runtime.vk.shared import open_context

        values = model.parameters()
        binary = model._executable.binary
        self.layout = FlatLayout.of({name: array.shape for name, array in values.items()})
        self.tensor = torch.from_numpy(self.layout.flatten(values))
        self.scope = open_context(None, features=binary.features, extensions=binary.extensions)
        self.buffer = self.scope.create_buffer(self.layout.size * 4, HostAccess.WRITE)
        self.mirror_buffer = None


class HostBridge:
    """Stands in for the CUDA bridge: the vector's bytes reach its buffer, the prologue runs, then the host path."""

    def __init__(self, executable, master, log):
        self.executable, self.master, self.log = executable, master, log

    def run(self, feeds, prologue=None):
        if len(feeds["x"]) == 0:  # as the bridge: nothing recorded, the prologue with the rest
            return {"y": torch.zeros(0, 3)}
        self.master.buffer.upload(self.master.tensor.numpy())
        if prologue is not None:
            self.executable.context.submit(prologue.record)
        self.log.append(prologue is not None)
        return {"y": torch.from_numpy(self.executable.run({"x": feeds["x"].numpy()})["y"])}


@pytest.fixture
def runner(require_vulkan, monkeypatch):
    model = coopnn.mlp(5, [16, 16], 3, backend="portable", initialisation="xavier", seed=1)
    master = CpuMaster(model)
    log = []
    monkeypatch.setattr(forward, "bridge_for", lambda executable: HostBridge(executable, master, log))
    yield forward.ForwardRunner(model, master, sync.member("portable")), log, model
    model.close()
    master.scope.close()


def _reference(runner, x):
    values = {k: v.numpy().copy() for k, v in runner.master.layout.views(runner.master.tensor).items()}
    with coopnn.mlp(5, [16, 16], 3, backend="numpy") as reference:
        reference.set_parameters(values)
        return reference.run(x.numpy())


def test_refreshes_follow_in_place_changes(runner):
    runner, log, _ = runner
    tensor = runner.master.tensor
    x = torch.rand(64, 5) * 2 - 1
    np.testing.assert_allclose(runner.run(x, tensor._version).numpy(), _reference(runner, x), rtol=1e-4, atol=1e-5)
    assert log == [False] and runner.host_refreshes == 0
    tensor.add_(torch.linspace(-0.1, 0.1, tensor.numel()))  # the zero biases, each in an entry of its own
    np.testing.assert_allclose(runner.run(x, tensor._version).numpy(), _reference(runner, x), rtol=1e-4, atol=1e-5)
    assert log[-1] is True and runner.host_refreshes == 0
    runner.run(x, tensor._version)
    assert log[-1] is False  # unchanged: nothing to refresh
    for step in range(3):
        tensor.mul_(0.9)
        np.testing.assert_allclose(runner.run(x, tensor._version).numpy(), _reference(runner, x), rtol=1e-4,
                                   atol=1e-5, err_msg=f"update {step}")
        assert log[-1] is True  # on the GPU, in the run's submission
    assert runner.host_refreshes == 0


def test_an_empty_batch_keeps_the_refresh_for_the_next_run(runner):
    runner, log, _ = runner
    tensor = runner.master.tensor
    x = torch.rand(64, 5) * 2 - 1
    tensor.add_(torch.linspace(-0.1, 0.1, tensor.numel()))
    runner.run(x, tensor._version)
    tensor.mul_(0.9)
    assert runner.run(torch.rand(0, 5), tensor._version).shape == (0, 3)
    np.testing.assert_allclose(runner.run(x, tensor._version).numpy(), _reference(runner, x), rtol=1e-4, atol=1e-5)
    assert log[-1] is True


def test_without_a_member_the_weights_are_refreshed_through_the_host(runner):
    member_runner, log, model = runner
    host = forward.ForwardRunner(model, member_runner.master, None)
    tensor = host.master.tensor
    x = torch.rand(64, 5) * 2 - 1
    for step in range(2):
        tensor.add_(torch.linspace(-0.1, 0.1, tensor.numel()))
        np.testing.assert_allclose(host.run(x, tensor._version).numpy(), _reference(host, x), rtol=1e-4, atol=1e-5)
        assert log[-1] is False and host.host_refreshes == step + 1
