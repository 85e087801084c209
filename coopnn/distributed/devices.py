"""Which Vulkan device is which GPU: the devices of a host that sharded inference spreads over (`device="all"`), and
the Vulkan device of a rank's CUDA device, matched by the UUID both APIs report."""

from __future__ import annotations

from typing import Sequence

from coopnn.errors import InputError


def normalized_uuid(text: str) -> str:
    """A device UUID as 32 lowercase hex digits, from Vulkan's hex or PyTorch's form ("GPU-8c1d...-...")."""
    digits = text.strip().lower().removeprefix("gpu-").replace("-", "")
    if len(digits) != 32 or any(c not in "0123456789abcdef" for c in digits):
        raise InputError(f"{text!r} is not a device UUID (32 hex digits)")
    return digits


def device_with_uuid(uuid: str, devices: Sequence) -> int:
    """The index of the Vulkan device (a `DeviceInfo` of `devices`) whose UUID is `uuid`."""
    wanted = normalized_uuid(uuid)
    for info in devices:
        if info.device_uuid and normalized_uuid(info.device_uuid) == wanted:
            return info.index
    seen = ", ".join(f"{d.index}: {d.name} {d.device_uuid or '(no UUID)'}" for d in devices)
    raise InputError(f"no Vulkan device has the UUID {wanted} of the CUDA device; Vulkan lists {seen}")


def vulkan_device_of_cuda(ordinal: int) -> int:
    """The Vulkan device index of CUDA device `ordinal` (as PyTorch numbers it, after CUDA_VISIBLE_DEVICES)."""
    import torch

    from coopnn.runtime.vk.context import list_devices

    return device_with_uuid(str(torch.cuda.get_device_properties(ordinal).uuid), list_devices())


def all_devices(devices: Sequence | None = None) -> list[int]:
    """The indices of every usable device of the best kind present (every GPU of a host; lavapipe alone where it is
    the only device)."""
    from coopnn.runtime.vk.selection import preference_order

    if devices is None:
        from coopnn.runtime.vk.context import list_devices

        devices = list_devices()
    ranked = preference_order(list(devices))
    if not ranked:
        raise InputError("no usable Vulkan device to shard over")
    return [d.index for d in ranked if d.device_type == ranked[0].device_type]
