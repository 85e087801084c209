"""Fixtures for tests that run models on a Vulkan device (lavapipe in CI)."""

from __future__ import annotations

import pytest

from tests.vulkan.runtime.conftest import validation_off_reason, vulkan_skip_reason


@pytest.fixture
def validated_device(monkeypatch):
    """Skips without a Vulkan device; turns the validation layer on for the models the test loads, when installed."""
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)
    if validation_off_reason() is None:
        monkeypatch.setenv("COOPNN_VALIDATION", "1")


def auto_backends() -> tuple[str, ...]:
    """The backends `backend="auto"` may take here: numpy on a CPU Vulkan device (lavapipe), a Vulkan one on a GPU."""
    from coopnn.runtime.executable import chosen_device

    return ("numpy",) if chosen_device(None).device_type == "cpu" else ("portable", "coopvec")
