"""Faults injected at every Vulkan call site of `load`, `run` and training steps (lavapipe): each ends in a
`CoopnnError` subclass (no raw `vulkan` exception) and leaves no Vulkan object behind. After an out-of-memory the next
load and run give correct results; after a lost device every later call on a model on that device raises
DeviceLostError naming it, and a fresh load gets a new device and correct results. The walk covers the first call of
every failable function and every submission and wait, with out-of-memory results, and every call that may report a
lost device. Fences are waited for without polling (`lane.SPIN_SECONDS` = 0), so that the calls made are the same in
every run, except to fail the first poll."""

from __future__ import annotations

import re

import numpy as np
import pytest

import coopnn
from coopnn.errors import CoopnnError, DeviceLostError
from coopnn.runtime.vk import lane
from tests.conftest import ROOT
from tests.runtime.vk.faults import DEVICE_LOST, RESULTS, Faults, can_fail, inject

pytestmark = pytest.mark.vulkan
MODEL = ROOT / "models" / "mlp_3_64x2_3.onnx"
X = np.random.default_rng(0).uniform(-1, 1, (100, 3)).astype(np.float32)
Y = np.random.default_rng(1).uniform(0, 1, (100, 3)).astype(np.float32)
# Calls each model and trainer on a lost device is tried with afterwards.
LATER_CALLS = 3


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


@pytest.fixture
def no_polls(monkeypatch):
    monkeypatch.setattr(lane, "SPIN_SECONDS", 0.0)


def _inference():
    with coopnn.load(MODEL, backend="portable") as model:
        model.run(X)
        return model.run(X)


def _training():
    with coopnn.mlp(3, [16], 3, backend="portable", seed=2) as model:
        trainer = coopnn.Trainer(model, seed=3)
        trainer.step(X, Y)
        losses = trainer.fit(X, Y, steps=3, batch_size=32, progress=False)
        return np.concatenate([losses, model.run(X).reshape(-1)])


def _walked(calls: list[str], result: int) -> list[tuple[str, int]]:
    """The calls a walk fails with `result`, as (function, n-th call of it): the first of each function that may
    report it, and every submission and fence wait; and the first fence poll, when it may report `result`."""
    made: dict[str, int] = {}
    walked = [("vkGetFenceStatus", 0)] if can_fail("vkGetFenceStatus", result) else []
    for name in calls:
        if can_fail(name, result) and (name not in made or name in ("vkQueueSubmit", "vkWaitForFences")):
            walked.append((name, made.get(name, 0)))
        made[name] = made.get(name, 0) + 1
    return walked


def _shared(model) -> object:
    return model._executable.context.shared_context


def _assert_lost_on_every_later_call(model) -> None:
    name = re.escape(_shared(model).info.name)
    for _ in range(LATER_CALLS):
        with pytest.raises(DeviceLostError, match=rf"(?s){name}.*was lost.*load it again with coopnn.load"):
            model.run(X)


# (scenario, faults walked, of them lost devices, failable functions called): the README's figures
@pytest.mark.parametrize("scenario, faults, lost_devices, functions",
                         [(_inference, 61, 9, 22), (_training, 121, 29, 22)], ids=["load_and_run", "train"])
def test_every_fault_is_a_typed_error_and_the_next_call_is_correct(scenario, faults, lost_devices, functions,
                                                                   monkeypatch, no_polls):
    expected = scenario()
    keeper = coopnn.load(MODEL, backend="portable")  # holds the shared context, to count its objects
    try:
        with inject(Faults()) as recorded:
            scenario()
        walked = lost = 0
        for result in RESULTS.values():
            for call in _walked(recorded.calls, result):
                context = _shared(keeper)
                before = context.live_objects()
                fault = Faults(call, result)
                # the first wait polls its fence at least once when polling is on for longer than a submission takes
                monkeypatch.setattr(lane, "SPIN_SECONDS", 10.0 if call[0] == "vkGetFenceStatus" else 0.0)
                try:
                    with inject(fault):
                        scenario()
                except CoopnnError:
                    pass
                except Exception as exc:  # noqa: BLE001 - the point of the test
                    pytest.fail(f"{call} failing with {result}: raw {type(exc).__name__}: {exc}")
                assert fault.injected, call
                walked += 1
                assert context.live_objects() == before, f"objects left after {call} failed with {result}"
                if result == DEVICE_LOST:
                    _assert_lost_on_every_later_call(keeper)
                    scope = keeper._executable.context
                    keeper.close()
                    assert scope.closed and not scope.live_objects()
                    keeper = coopnn.load(MODEL, backend="portable")
                    assert _shared(keeper) is not context
                    lost += 1
                np.testing.assert_allclose(scenario(), expected, rtol=1e-5, atol=1e-6)
        assert walked >= faults and lost >= lost_devices and len(set(recorded.calls)) >= functions
    finally:
        keeper.close()


def test_a_lost_device_fails_every_later_call_and_a_fresh_load_works():
    model = coopnn.load(MODEL, backend="portable")
    expected = model.run(X)
    trainer = coopnn.Trainer(model, seed=3)
    trainer.step(X, Y)
    with pytest.raises(DeviceLostError, match="vkQueueSubmit reported VK_ERROR_DEVICE_LOST"):
        with inject(Faults(("vkQueueSubmit", 0), DEVICE_LOST)):
            model.run(X)
    lost = _shared(model)
    _assert_lost_on_every_later_call(model)
    for _ in range(LATER_CALLS):
        with pytest.raises(DeviceLostError, match=f"{re.escape(lost.info.name)}.*was lost"):
            trainer.step(X, Y)
    with coopnn.load(MODEL, backend="portable") as fresh:
        assert _shared(fresh) is not lost
        np.testing.assert_array_equal(fresh.run(X), expected)
        fresh_trainer = coopnn.Trainer(fresh, seed=3)
        assert np.isfinite(fresh_trainer.step(X, Y))
    scopes = [model._executable.context, trainer.session.context]
    trainer.session.close()
    model.close()
    assert all(scope.closed and not scope.live_objects() for scope in scopes)
