"""Optimizers: PyTorch's update rules (checked by hand and, where torch is installed, against torch.optim), state
dicts that resume exactly, and argument checks."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.errors import InputError, ModelFormatError
from coopnn.train.optim import OPTIMIZERS, SGD, Adam
from tests.conftest import import_torch

rng = np.random.default_rng(5)
START = {"w": rng.uniform(-1, 1, (3, 4)).astype(np.float32), "b": rng.uniform(-1, 1, 3).astype(np.float32)}
GRADIENTS = [{k: rng.normal(size=v.shape).astype(np.float32) for k, v in START.items()} for _ in range(6)]


def _run(optimizer, gradients=GRADIENTS, start=START):
    params = {k: v.copy() for k, v in start.items()}
    for grads in gradients:
        optimizer.update(params, grads)
    return params


def test_exposed_as_coopnn_optim():
    assert coopnn.optim.Adam is Adam and coopnn.optim.SGD is SGD and set(OPTIMIZERS) == {"adam", "sgd"}


def test_first_adam_step_moves_each_weight_by_lr_against_its_gradient_sign():
    params = _run(Adam(lr=0.01, eps=0.0), GRADIENTS[:1])
    for k in START:
        np.testing.assert_allclose(params[k], START[k] - 0.01 * np.sign(GRADIENTS[0][k]), rtol=1e-6)


def test_sgd_with_momentum_by_hand():
    params = _run(SGD(lr=0.1, momentum=0.9), GRADIENTS[:2])
    g0, g1 = GRADIENTS[0]["w"], GRADIENTS[1]["w"]
    np.testing.assert_allclose(params["w"], START["w"] - 0.1 * g0 - 0.1 * (0.9 * g0 + g1), rtol=1e-6)
    plain = _run(SGD(lr=0.1, weight_decay=0.5), GRADIENTS[:1])
    np.testing.assert_allclose(plain["b"], START["b"] - 0.1 * (GRADIENTS[0]["b"] + 0.5 * START["b"]), rtol=1e-6)


def _torch_run(torch_optimizer_factory):
    torch = import_torch()
    tensors = {k: torch.tensor(v.copy(), requires_grad=True) for k, v in START.items()}
    optimizer = torch_optimizer_factory(torch, list(tensors.values()))
    for grads in GRADIENTS:
        for k, t in tensors.items():
            t.grad = torch.tensor(grads[k])
        optimizer.step()
    return {k: t.detach().numpy() for k, t in tensors.items()}


CONFIGURATIONS = [
    (lambda: Adam(lr=1e-2, betas=(0.9, 0.99)), lambda torch, p: torch.optim.Adam(p, lr=1e-2, betas=(0.9, 0.99))),
    (lambda: Adam(lr=1e-3, weight_decay=0.1), lambda torch, p: torch.optim.Adam(p, lr=1e-3, weight_decay=0.1)),
    (lambda: SGD(lr=0.05), lambda torch, p: torch.optim.SGD(p, lr=0.05)),
    (lambda: SGD(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
     lambda torch, p: torch.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    (lambda: SGD(lr=0.05, momentum=0.8, nesterov=True),
     lambda torch, p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
]


@pytest.mark.parametrize("ours, theirs", CONFIGURATIONS, ids=["adam", "adam_decay", "sgd", "sgd_momentum", "nesterov"])
def test_matches_torch_optim(ours, theirs):
    expected = _torch_run(theirs)
    got = _run(ours())
    for k in START:
        np.testing.assert_allclose(got[k], expected[k], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("make", [lambda: Adam(lr=1e-2), lambda: SGD(lr=0.1, momentum=0.9)], ids=["adam", "sgd"])
def test_state_dict_resumes_exactly(make):
    whole = _run(make())
    first = make()
    middle = _run(first, GRADIENTS[:3])
    state = first.state_dict()
    state["slots"] = {slot: {k: v.copy() for k, v in arrays.items()} for slot, arrays in state["slots"].items()}
    second = make()
    second.lr = 123.0  # overwritten: hyperparameters come from the state
    second.load_state_dict(state)
    assert second.step_count == 3 and second.hyperparameters() == first.hyperparameters()
    resumed = _run(second, GRADIENTS[3:], middle)
    for k in START:
        np.testing.assert_array_equal(resumed[k], whole[k])


def test_state_dict_contents():
    optimizer = Adam(lr=0.5, betas=(0.8, 0.9))
    _run(optimizer, GRADIENTS[:1])
    state = optimizer.state_dict()
    assert state["type"] == "adam" and state["step"] == 1
    assert state["hyperparameters"] == {"lr": 0.5, "betas": [0.8, 0.9], "eps": 1e-8, "weight_decay": 0.0,
                                     "no_decay": []}
    assert set(state["slots"]) == {"m", "v"} and state["slots"]["m"]["w"].shape == (3, 4)


def test_state_of_another_optimizer_is_refused():
    with pytest.raises(ModelFormatError, match="optimizer state of type 'sgd' cannot load into 'adam'"):
        Adam().load_state_dict(SGD().state_dict())


@pytest.mark.parametrize("make", [lambda: Adam(lr=-1), lambda: Adam(betas=(0.9, 1.0)), lambda: Adam(eps=-1),
                                  lambda: SGD(momentum=-0.1), lambda: SGD(nesterov=True)])
def test_bad_hyperparameters(make):
    with pytest.raises(InputError):
        make()


def test_malformed_state_is_a_format_error():
    state = Adam().state_dict()
    with pytest.raises(ModelFormatError, match="malformed adam optimizer state"):
        Adam().load_state_dict({**state, "hyperparameters": {"lr": 1, "momentum": 0.9}})
    with pytest.raises(ModelFormatError, match="keeps the slots"):
        Adam().load_state_dict({**state, "slots": {"momentum": {}}})


def test_weight_decay_skips_the_parameters_named_in_no_decay():
    for optimizer in (Adam(lr=0.1, weight_decay=0.5, no_decay=["grid"]), SGD(lr=0.1, weight_decay=0.5,
                                                                             no_decay=["grid"])):
        parameters = {"grid": np.ones(2, np.float32), "w": np.ones(2, np.float32)}
        optimizer.update(parameters, {"grid": np.zeros(2), "w": np.zeros(2)})
        assert np.all(parameters["grid"] == 1) and np.all(parameters["w"] < 1)
