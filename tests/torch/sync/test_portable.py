"""The portable member of `coopnn.torch.sync` on lavapipe (no CUDA needed: the vector is a Vulkan buffer here): which
entries hold which parameter, and the copies that rewrite the weight buffer, rows padded or not, checked by running
the kernel against the numpy backend with the new parameters."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.runtime.vk.memory import HostAccess
from tests.conftest import ROOT, import_torch

torch = import_torch()  # before coopnn.torch, which imports it
from coopnn.torch import sync  # noqa: E402
from coopnn.torch.flat_layout import FlatLayout  # noqa: E402

pytestmark = pytest.mark.vulkan


class VulkanMaster:
    """Stands in for `MasterWeights`: the vector in a Vulkan buffer of the model's context, written by the host."""

    def __init__(self, executable, values):
        self.layout = FlatLayout.of({name: array.shape for name, array in values.items()})
        flat = self.layout.flatten(values)
        self.buffer = executable.context.create_buffer(flat.nbytes, HostAccess.WRITE)
        self.buffer.upload(flat)
        self.mirror_buffer = None


def _new_values(model, seed):
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, array.shape).astype(np.float32) for name, array in model.parameters().items()}


def test_parameters_with_equal_contents_keep_entries_of_their_own(require_vulkan):
    with coopnn.mlp(3, [16, 16], 4, backend="portable", initialisation="xavier") as model:  # biases all zero
        held = sync.held_parameters(model._executable, model.graph)
        assert held is not None and sorted(held.values()) == sorted(model.parameters())


def test_an_imported_model_whose_constants_are_named_apart_from_its_parameters_holds_each(require_vulkan):
    with coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx", backend="portable") as model:
        held = sync.held_parameters(model._current_executable(), model.graph)
        assert held is not None and sorted(held.values()) == sorted(model.parameters())


@pytest.mark.parametrize("widths", [(3, [16, 16], 4), (8, [24], 5)], ids=["padded rows", "whole groups"])
def test_the_copies_write_the_vector_into_the_weights(require_vulkan, widths):
    n_in, hidden, n_out = widths
    with coopnn.mlp(n_in, hidden, n_out, backend="portable", seed=2) as model:
        executable = model._current_executable()
        member = sync.member("portable")
        held = sync.held_parameters(executable, model.graph)
        values = _new_values(model, 3)
        master = VulkanMaster(executable, values)
        prologue = member.prologue(executable, master, held)
        assert prologue.buffers == (master.buffer,)
        executable.context.submit(prologue.record)
        x = np.random.default_rng(4).uniform(-1, 1, (50, n_in)).astype(np.float32)
        got = executable.run({"x": x})["y"]
        with coopnn.mlp(n_in, hidden, n_out, backend="numpy", seed=2) as reference:
            reference.set_parameters(values)
            np.testing.assert_allclose(got, reference.run(x), rtol=1e-4, atol=1e-5)


def test_members_by_backend():
    assert sync.member("portable").BACKEND == "portable" and not sync.member("portable").READS_HALVES
    assert sync.member("coopvec").READS_HALVES
    assert sync.member("numpy") is None
