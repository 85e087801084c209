"""Whether Vulkan can run coopnn here, answered without raising: for the backend registry and `coopnn info`."""

from __future__ import annotations

from coopnn.errors import BackendUnavailableError


def vulkan_unavailable_reason(device: str | int | None = None) -> str | None:
    """None when the device `device` (or COOPNN_DEVICE, or the best one) is usable, else what is missing (package,
    loader, driver or device) and how to get it."""
    try:
        from coopnn.runtime.vk.context import list_devices
        from coopnn.runtime.vk.selection import select_device

        select_device(list_devices(), device)
    except BackendUnavailableError as exc:
        return str(exc)
    return None
