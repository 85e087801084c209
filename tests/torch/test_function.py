"""The autograd function of `coopnn.torch` on lavapipe, its forward stood in for by the host path: which gradients
it returns (parameters, and the input only where it requires them), and that double backward is refused."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.errors import CompileError
from tests.conftest import import_torch

torch = import_torch()  # before coopnn.torch, which imports it
from coopnn.torch import sync  # noqa: E402
from coopnn.torch.backward import BackwardRunner  # noqa: E402
from coopnn.torch.flat_layout import FlatLayout  # noqa: E402
from coopnn.torch.function import CoopnnForward  # noqa: E402

pytestmark = pytest.mark.vulkan


class HostForward:
    def __init__(self, model):
        self.model = model

    def run(self, x, version):
        return torch.from_numpy(self.model.run(x.detach().numpy()))


@pytest.fixture
def parts(require_vulkan):
    with coopnn.mlp(4, [8], 2, backend="portable", seed=5) as model:
        layout = FlatLayout.of({name: array.shape for name, array in model.parameters().items()})
        params = torch.nn.Parameter(torch.from_numpy(layout.flatten(model.parameters())))
        backward = BackwardRunner(model, layout, sync.member("portable"))
        yield HostForward(model), backward, params, layout
        backward.close()


def _reference(layout, params, x):
    views = layout.views(params)
    hidden = torch.relu(torch.nn.functional.linear(x, views["layers.0.weight"], views["layers.0.bias"]))
    return torch.nn.functional.linear(hidden, views["layers.1.weight"], views["layers.1.bias"])


def test_gradients_reach_the_parameters_and_the_input_that_asks(parts):
    forward, backward, params, layout = parts
    x = torch.rand(30, 4)
    CoopnnForward.apply(forward, backward, torch.float32, x, params).square().sum().backward()
    assert x.grad is None
    reference = params.detach().clone().requires_grad_()
    _reference(layout, reference, x).square().sum().backward()
    np.testing.assert_allclose(params.grad.numpy(), reference.grad.numpy(), rtol=1e-4, atol=1e-5)
    x.requires_grad_()
    grad_x, = torch.autograd.grad(CoopnnForward.apply(forward, backward, torch.float32, x, params).sum(), x)
    want, = torch.autograd.grad(_reference(layout, params.detach(), x).sum(), x)
    np.testing.assert_allclose(grad_x.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def test_double_backward_is_refused(parts):
    forward, backward, params, _ = parts
    x = torch.rand(10, 4, requires_grad=True)
    with pytest.raises(CompileError, match="cannot be differentiated again"):
        torch.autograd.grad(CoopnnForward.apply(forward, backward, torch.float32, x, params).sum(), x,
                            create_graph=True)


def test_parameters_changed_after_the_forward_pass_are_refused_by_torch(parts):
    forward, backward, params, _ = parts
    y = CoopnnForward.apply(forward, backward, torch.float32, torch.rand(10, 4), params)
    with torch.no_grad():
        params.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
