"""`BackwardSteps` on lavapipe (portable backend, plain device buffers where the GPU path passes shared ones): the
parameters copied into the session's weights, the gradients copied out in the module's layout, against the backward
pass through the host; and the regions between the two layouts."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from tests.conftest import import_torch

torch = import_torch()  # before coopnn.torch, which imports it
from coopnn.runtime.vk.memory import HostAccess  # noqa: E402
from coopnn.torch import sync  # noqa: E402
from coopnn.torch.backward import BackwardRunner  # noqa: E402
from coopnn.torch.backward_steps import BackwardBuffers, BackwardSteps  # noqa: E402
from coopnn.torch.flat_layout import FlatLayout  # noqa: E402
from coopnn.torch.session_regions import _block  # noqa: E402

FP32 = {"rtol": 1e-4, "atol": 1e-5}


def test_blocks_copy_whole_rows_where_both_sides_pack_alike_and_row_by_row_elsewhere():
    assert _block(8, 4, 16, 4, 3, 4, 4) == [(32, 64, 48)]
    assert _block(8, 8, 0, 4, 2, 3, 2) == [(16, 0, 6), (32, 8, 6)]
    assert _block(5, 7, 9, 7, 1, 7, 4) == [(20, 36, 28)]


GRID = {"otype": "HashGrid", "n_levels": 2, "n_features_per_level": 2, "log2_hashmap_size": 8, "base_resolution": 4,
        "per_level_scale": 1.5}


@pytest.mark.vulkan
@pytest.mark.parametrize("encoding", [None, GRID], ids=["mlp", "hashgrid"])
def test_gradients_on_the_gpu_match_the_host_pass(require_vulkan, encoding):
    width = 5 if encoding is None else 2
    with coopnn.mlp(width, [16, 12], 3, encoding=encoding, backend="portable", seed=4) as model:
        layout = FlatLayout.of({name: array.shape for name, array in model.parameters().items()})
        runner = BackwardRunner(model, layout, sync.member("portable"))
        rng = np.random.default_rng(4)
        params = torch.from_numpy(layout.flatten(model.parameters())) * 1.5  # not what the session starts with
        x = torch.tensor(rng.uniform(0, 1, (37, width)), dtype=torch.float32)
        dy = torch.tensor(rng.uniform(-1, 1, (37, 3)), dtype=torch.float32)
        wants_x = encoding is None  # an encoding before the first layer gives no input gradient
        want, want_x = runner.run(x, dy, params, 1, wants_x)
        session = runner.last.session
        session.load_parameters(model.parameters())  # the GPU copy of `params` must replace these
        context = session.context

        def buffer(values: np.ndarray, access=HostAccess.WRITE):
            made = context.create_buffer(values.nbytes, access)
            made.upload(values)
            return made

        steps = BackwardSteps(session, layout, model.inputs[0].name)
        made = BackwardBuffers(buffer(x.numpy()), buffer(dy.numpy()),
                               buffer(np.full(layout.size, 7.0, np.float32), HostAccess.READ),
                               buffer(np.zeros((37, width), np.float32), HostAccess.READ) if wants_x else None,
                               buffer(params.numpy()))
        context.run(steps.commands(made, 37))
        got = made.gradient.download(np.float32, layout.size)
        np.testing.assert_allclose(got, want.numpy(), **FP32)
        padding = np.ones(layout.size, bool)
        for entry in layout.views(np.arange(layout.size)).values():
            padding[entry.reshape(-1)] = False
        assert not got[padding].any()  # the copy's caller fills the vector first: the padding stays zero
        if wants_x:
            np.testing.assert_allclose(made.input_gradient.download(np.float32, 37 * width).reshape(37, width),
                                       want_x.numpy(), **FP32)
        for b in (made.x, made.upstream, made.gradient, made.input_gradient, made.weights):
            if b is not None:
                b.destroy()
        runner.close()
