"""`BackwardRunner` on lavapipe (portable backend, CPU tensors: the runner's GPU work is the training kernels'):
gradients in the parameters and in the input for every activation tiny-cuda-nn configs name and every loss written
in PyTorch, against PyTorch's autograd of the same network in float32."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.nets.tcnn_config import ACTIVATIONS
from coopnn.errors import ModelClosedError
from tests.conftest import import_torch

torch = import_torch()  # before coopnn.torch, which imports it
from coopnn.torch import sync  # noqa: E402
from coopnn.torch.backward import BackwardRunner  # noqa: E402
from coopnn.torch.flat_layout import FlatLayout  # noqa: E402

pytestmark = pytest.mark.vulkan

FP32 = {"rtol": 1e-4, "atol": 1e-5}
F = torch.nn.functional
LOSSES = {
    "l2": lambda y, t: F.mse_loss(y, t),
    "l1": lambda y, t: F.l1_loss(y, t),
    "relative_l2": lambda y, t: ((y - t) ** 2 / (y.detach() ** 2 + 0.01)).mean(),
    "huber": lambda y, t: F.huber_loss(y, t),
    "bce_with_logits": lambda y, t: F.binary_cross_entropy_with_logits(y, t.clamp(0, 1)),
}
TORCH_ACTIVATIONS = {"relu": torch.relu, "leakyrelu": lambda v: F.leaky_relu(v, 0.01), "exponential": torch.exp,
                     "sine": torch.sin, "sigmoid": torch.sigmoid, "softplus": lambda v: F.softplus(v, beta=10.0),
                     "tanh": torch.tanh, "none": lambda v: v}


def _in_pytorch(views, x, activation):
    y = x
    for i in range(3):
        y = F.linear(y, views[f"layers.{i}.weight"], views[f"layers.{i}.bias"])
        y = TORCH_ACTIVATIONS[activation](y) if i < 2 else y
    return y


def _check(activation: str, loss: str, seed: int):
    with coopnn.mlp(5, [16, 16], 3, activation=ACTIVATIONS[activation], backend="portable", seed=seed) as model:
        layout = FlatLayout.of({name: array.shape for name, array in model.parameters().items()})
        params = torch.from_numpy(layout.flatten(model.parameters())).requires_grad_()
        runner = BackwardRunner(model, layout, sync.member("portable"))
        rng = np.random.default_rng(seed)
        x = torch.tensor(rng.uniform(-1, 1, (45, 5)), dtype=torch.float32, requires_grad=True)
        target = torch.tensor(rng.uniform(-1, 1, (45, 3)), dtype=torch.float32)
        y = _in_pytorch(layout.views(params), x, activation)
        dy, = torch.autograd.grad(LOSSES[loss](y, target), y, retain_graph=True)
        y.backward(dy)
        grad_params, grad_x = runner.run(x, dy, params, params._version, True)
        np.testing.assert_allclose(grad_params.numpy(), params.grad.numpy(), **FP32)
        np.testing.assert_allclose(grad_x.numpy(), x.grad.numpy(), **FP32)
        runner.close()


@pytest.mark.slow  # a training session compiled on lavapipe for each
@pytest.mark.parametrize("activation", sorted(set(ACTIVATIONS) - {"none"}))
def test_gradients_for_every_activation(require_vulkan, activation):
    _check(activation, "l2", 1)


@pytest.mark.slow
@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_gradients_for_every_loss(require_vulkan, loss):
    _check("relu", loss, 2)


def test_parameters_changed_in_place_reach_the_session(require_vulkan):
    with coopnn.mlp(5, [16, 16], 3, backend="portable", seed=3) as model:
        layout = FlatLayout.of({name: array.shape for name, array in model.parameters().items()})
        params = torch.from_numpy(layout.flatten(model.parameters())).requires_grad_()
        runner = BackwardRunner(model, layout, sync.member("portable"))
        x, dy = torch.rand(20, 5), torch.rand(20, 3)
        first, _ = runner.run(x, dy, params, params._version, False)
        with torch.no_grad():
            params.mul_(0.5)
        second, none = runner.run(x, dy, params, params._version, False)
        assert none is None and not torch.allclose(first, second)
        y = _in_pytorch(layout.views(params), x, "relu")
        y.backward(dy)
        np.testing.assert_allclose(second.numpy(), params.grad.numpy(), **FP32)
        runner.close()


def test_an_empty_batch_gets_zero_gradients_and_a_closed_runner_refuses(require_vulkan):
    with coopnn.mlp(5, [16], 3, backend="portable", seed=3) as model:
        layout = FlatLayout.of({name: array.shape for name, array in model.parameters().items()})
        params = torch.from_numpy(layout.flatten(model.parameters()))
        runner = BackwardRunner(model, layout, sync.member("portable"))
        for batch in (0, 8, 0):  # before the session holds a batch, and after
            grad, grad_x = runner.run(torch.rand(batch, 5), torch.rand(batch, 3), params, params._version, True)
            assert grad.shape == (layout.size,) and grad_x.shape == (batch, 5)
            assert batch or not (grad.any() or grad_x.numel())
        runner.close()
        with pytest.raises(ModelClosedError, match="closed"):
            runner.run(torch.rand(8, 5), torch.rand(8, 3), params, params._version, False)
        assert not runner.sessions  # no session made anew for a closed module
