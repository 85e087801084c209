"""Fixtures shared by the interop tests."""

from __future__ import annotations

import pytest

from tests.devices import validation_off_reason, vulkan_skip_reason


@pytest.fixture
def export_context():
    """A context with VK_KHR_external_memory_fd (and the validation layer when installed)."""
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)
    from coopnn.runtime.vk.context import VulkanContext, list_devices

    if not any("VK_KHR_external_memory_fd" in d.extensions for d in list_devices()):
        pytest.skip("no Vulkan device lists VK_KHR_external_memory_fd")
    context = VulkanContext(extensions={"VK_KHR_external_memory_fd"}, validation=validation_off_reason() is None)
    yield context
    messages = list(context.debug_messages)
    context.close()
    assert messages == []
