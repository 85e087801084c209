"""Faults injected at every Vulkan call site of `load`, `run` and training steps (lavapipe): each ends in a
`CoopnnError` subclass (no raw `vulkan` exception), leaves no Vulkan object behind, and the next load and run give
correct results. The walk covers the first call of every failable function and every submission and wait, with
out-of-memory and device-lost results."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.errors import CoopnnError
from tests.conftest import ROOT
from tests.runtime.vk.faults import RESULTS, Faults, inject

pytestmark = pytest.mark.vulkan
MODEL = ROOT / "models" / "mlp_3_64x2_3.onnx"
X = np.random.default_rng(0).uniform(-1, 1, (100, 3)).astype(np.float32)
Y = np.random.default_rng(1).uniform(0, 1, (100, 3)).astype(np.float32)


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


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


def _walked(calls: list[str]) -> list[int]:
    """The call numbers a walk fails: the first of each function, and every submission and fence wait but polls."""
    seen, numbers = set(), []
    for number, name in enumerate(calls):
        if name not in seen or name in ("vkQueueSubmit", "vkWaitForFences"):
            numbers.append(number)
        seen.add(name)
    return numbers


@pytest.mark.parametrize("scenario", [_inference, _training], ids=["load_and_run", "train"])
def test_every_fault_is_a_typed_error_and_the_next_call_is_correct(scenario):
    expected = scenario()
    with coopnn.load(MODEL, backend="portable") as keeper:  # holds the shared context, to count its objects
        context = keeper._executable.context.shared_context
        with inject(Faults()) as recorded:
            scenario()
        before = context.live_objects()
        walked = 0
        for result in RESULTS.values():
            for number in _walked(recorded.calls):
                faults = Faults(number, result)
                try:
                    with inject(faults):
                        scenario()
                except CoopnnError:
                    pass
                except Exception as exc:  # noqa: BLE001 - the point of the test
                    pytest.fail(f"{faults.calls[number]} failing with {result}: raw {type(exc).__name__}: {exc}")
                walked += 1
                assert context.live_objects() == before, f"objects left after {faults.calls[number]} failed"
                np.testing.assert_allclose(scenario(), expected, rtol=1e-5, atol=1e-6)
        assert walked >= 20 and len(set(recorded.calls)) >= 15
