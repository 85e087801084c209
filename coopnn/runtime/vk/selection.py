"""Choosing the physical device: discrete GPUs first, then integrated, virtual and CPU devices.

A choice can be forced with `device=` (an index, or a case-insensitive substring of the device name) or, when that is
not given, with the COOPNN_DEVICE environment variable in the same form. A choice that matches nothing usable raises
BackendUnavailableError listing every device and why any is unusable.
"""

from __future__ import annotations

import os

from coopnn.errors import BackendUnavailableError
from coopnn.runtime.vk.device_info import DeviceInfo
from coopnn.runtime.vk.loader import INSTALL_HINT

DEVICE_ENV = "COOPNN_DEVICE"

TYPE_PREFERENCE = ("discrete", "integrated", "virtual", "cpu", "other")


def preference_order(devices: list[DeviceInfo]) -> list[DeviceInfo]:
    """Usable devices, best first: by type, then in enumeration order."""
    usable = [d for d in devices if d.unsuitable_reason is None]
    return sorted(usable, key=lambda d: (TYPE_PREFERENCE.index(d.device_type), d.index))


def select_device(devices: list[DeviceInfo], device: str | int | None = None) -> DeviceInfo:
    """The device `device` (or COOPNN_DEVICE) names, else the preferred usable one."""
    if not devices:
        raise BackendUnavailableError(f"the Vulkan loader found no device; {INSTALL_HINT}")
    request, source = (device, "device=") if device is not None else (os.environ.get(DEVICE_ENV), f"{DEVICE_ENV}=")
    ranked = preference_order(devices)
    if request is None or request == "":
        if not ranked:
            raise BackendUnavailableError(f"no usable Vulkan device; {describe_devices(devices)}")
        return ranked[0]
    matches = [d for d in ranked if _matches(d, request)]
    if not matches:
        raise BackendUnavailableError(
            f"no usable Vulkan device matches {source}{request!r} (an index or part of a device name); "
            f"{describe_devices(devices)}")
    return matches[0]


def _matches(info: DeviceInfo, request: str | int) -> bool:
    if isinstance(request, int) or request.strip().isdigit():
        return info.index == int(request)
    return request.strip().lower() in info.name.lower()


def describe_devices(devices: list[DeviceInfo]) -> str:
    """One line naming every device and why any of them is unusable."""
    lines = [d.describe() + (f" (unusable: {d.unsuitable_reason})" if d.unsuitable_reason else "") for d in devices]
    return "devices: " + "; ".join(lines)


def device_requested(device: str | int | None) -> bool:
    """Whether a device was asked for: by `device`, or by a non-empty COOPNN_DEVICE."""
    return device is not None or bool(os.environ.get(DEVICE_ENV))
