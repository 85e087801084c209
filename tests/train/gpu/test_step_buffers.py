"""A training step whose buffers the device runs out of memory making: the step is refused naming a batch that fits
(measured by making its buffers), never trained on fewer samples than asked; that batch then trains as on a fresh
trainer, and nothing is left allocated. On lavapipe, with out-of-memory results injected at each Vulkan call that
makes the step's buffers (`tests/runtime/vk/faults.py`)."""

from __future__ import annotations

import contextlib
import re

import numpy as np
import pytest

import coopnn
from coopnn.errors import DeviceMemoryError
from coopnn.train.gpu.step_buffers import candidates, largest, make_fitting
from tests.runtime.vk.faults import RESULTS, Faults, inject

X = np.random.default_rng(0).uniform(-1, 1, (256, 2)).astype(np.float32)
Y = np.random.default_rng(1).uniform(0, 1, (256, 3)).astype(np.float32)
OUT_OF_MEMORY = [RESULTS["out of device memory"], RESULTS["out of host memory"]]
NAMED = re.compile(r"use batch_size=(\d+) or less")


def test_candidates_are_the_capacity_the_batch_then_its_halves():
    assert candidates(128, 100, 1) == [128, 100, 50, 25, 12, 6, 3, 1]
    assert candidates(64, 64, 16) == [64, 32, 16]
    assert candidates(16, 16, 16) == [16]


@pytest.mark.parametrize("room", [0, 1, 999, 1000, 4097])
def test_largest_is_the_largest_capacity_that_fits(room):
    def fits(capacity):
        return capacity * 3 + -(-capacity // 1024) * 100 <= room * 3  # per sample, and per chunk of them

    expected = max((c for c in range(1001) if fits(c)), default=0)
    assert largest(fits, 1000) == expected


class _Device:
    """Makes buffers for at most `room` samples; records what is made and freed."""

    def __init__(self, room: int):
        self.room, self.made, self.held = room, [], 0

    def make(self, size: int) -> None:
        self.made.append(size)
        if size > self.room:
            raise DeviceMemoryError(f"no room for {size}")
        self.held = size

    def free(self) -> None:
        self.held = 0


def test_a_batch_that_fits_without_the_rounding_up_is_made_as_asked():
    device = _Device(100)
    make_fitting(device.make, device.free, 128, 100, 1, "a step")
    assert device.made == [128, 100] and device.held == 100


def test_a_batch_that_does_not_fit_names_the_largest_half_that_does_and_frees_it():
    device = _Device(30)
    with pytest.raises(DeviceMemoryError, match=r"a step does not fit .*no room for 128.*use batch_size=25 or less"):
        make_fitting(device.make, device.free, 128, 100, 1, "a step")
    assert device.made == [128, 100, 50, 25] and device.held == 0


def test_nothing_fitting_says_so():
    device = _Device(0)
    with pytest.raises(DeviceMemoryError, match="nor does a step of 16 samples: free other GPU work"):
        make_fitting(device.make, device.free, 64, 64, 16, "a step")
    assert device.made == [64, 32, 16] and device.held == 0


@contextlib.contextmanager
def _trainer():
    """A trainer of a fresh model (a model starts from the weights its last trainer left)."""
    with coopnn.mlp(2, [16], 3, backend="portable", seed=2) as model:
        trainer = coopnn.Trainer(model, seed=3)
        try:
            yield trainer
        finally:
            trainer.session.close()


def _stepped(batch: int) -> dict[str, np.ndarray]:
    """The parameters after one step on the first `batch` samples, on a fresh trainer."""
    with _trainer() as trainer:
        trainer.step(X[:batch], Y[:batch])
        return trainer.session.parameters()


def _step_buffer_calls(batch: int) -> list[tuple[str, int]]:
    """The failable calls a first step makes before it records the step (its command pool first): those making its
    buffers, as (function, n-th call of it)."""
    with _trainer() as trainer, inject(Faults()) as recorded:
        trainer.step(X[:batch], Y[:batch])
    calls = recorded.calls[:recorded.calls.index("vkCreateCommandPool")]
    return [(name, calls[:i].count(name)) for i, name in enumerate(calls)]


def _assert_same(parameters: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert parameters.keys() == expected.keys()
    for name, value in expected.items():
        np.testing.assert_allclose(parameters[name], value, rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.vulkan
@pytest.mark.parametrize("result", OUT_OF_MEMORY, ids=["device", "host"])
def test_a_step_out_of_memory_names_a_batch_that_then_trains(validated_device, result):
    calls = _step_buffer_calls(64)
    # the README's figure: 4 buffers, each created, allocated and bound, 3 of them mapped
    assert len(calls) >= 15 and {name for name, _ in calls} >= {"vkCreateBuffer", "vkAllocateMemory",
                                                                "vkBindBufferMemory", "vkMapMemory"}
    expected: dict[int, dict] = {}
    for call in calls:
        with _trainer() as trainer:
            before = trainer.session.context.live_objects()
            fault = Faults(call, result)
            with pytest.raises(DeviceMemoryError, match=r"training step of 64 samples .* does not fit") as refused:
                with inject(fault):
                    trainer.step(X[:64], Y[:64])
            assert fault.injected, call
            assert trainer.session.context.live_objects() == before, call
            named = int(NAMED.search(str(refused.value)).group(1))
            assert 0 < named < 64, str(refused.value)
            assert trainer.steps == 0
            trainer.step(X[:named], Y[:named])
            if named not in expected:
                expected[named] = _stepped(named)
            _assert_same(trainer.session.parameters(), expected[named])


@pytest.mark.vulkan
def test_a_step_whose_rounded_up_buffers_do_not_fit_trains_the_batch_asked(validated_device):
    with _trainer() as trainer:
        with inject(Faults(("vkAllocateMemory", 0), RESULTS["out of device memory"])) as fault:
            trainer.step(X[:100], Y[:100])
        assert fault.injected and trainer.session.capacity == 100
        parameters = trainer.session.parameters()
    _assert_same(parameters, _stepped(100))


@pytest.mark.vulkan
def test_a_fit_out_of_memory_names_a_batch_that_then_fits(validated_device):
    with _trainer() as trainer:
        with inject(Faults()) as recorded:
            trainer.session.upload_data({"x": X}, {trainer.session.plan.output: Y}).close()
        data_allocations = recorded.calls.count("vkAllocateMemory")
        before = trainer.session.context.live_objects()
        fault = Faults(("vkAllocateMemory", data_allocations), RESULTS["out of device memory"])
        with pytest.raises(DeviceMemoryError, match="training step of 128 samples") as refused:
            with inject(fault):
                trainer.fit(X, Y, steps=3, batch_size=128, progress=False)
        assert fault.injected and trainer.session.context.live_objects() == before and trainer.steps == 0
        named = int(NAMED.search(str(refused.value)).group(1))
        assert 0 < named < 128
        assert np.isfinite(trainer.fit(X, Y, steps=3, batch_size=named, progress=False)).all()
