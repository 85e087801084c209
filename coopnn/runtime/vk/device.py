"""The logical device: exactly the features and extensions asked for, and one compute queue.

A feature is named as in the Vulkan spec ("shaderFloat16", "cooperativeVector", ...); the struct holding it is found
in `chain.FEATURE_OWNER`, and the extension that struct belongs to is enabled with it. Anything the device lacks raises
BackendUnavailableError naming the device and what it lacks.

A lost device never comes back (the Vulkan specification: every later submission on it fails). `DeviceHealth`
records the first loss reported on it (by `Lane`, which makes every submission and wait, and by the context's closing
waits), so that everything later on that device fails at once with DeviceLostError naming it, and so that the shared
context (`runtime/vk/shared.py`) hands out a new device instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from coopnn.errors import BackendUnavailableError, DeviceLostError
from coopnn.runtime.vk.chain import enable_chain
from coopnn.runtime.vk.device_info import DeviceInfo
from coopnn.runtime.vk.loader import check, load_vulkan
from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()


class DeviceHealth:
    """Whether a logical device was lost, and how that was first reported."""

    def __init__(self, info: DeviceInfo):
        self.info = info
        self.lost: str | None = None

    def record(self, error: DeviceLostError) -> None:
        if self.lost is None:
            self.lost = str(error)

    def check(self) -> None:
        """DeviceLostError naming the device when it was lost."""
        if self.lost is not None:
            raise DeviceLostError(
                f"Vulkan device {self.info.describe()} was lost earlier and nothing more runs on it: close this "
                f"model (and its trainers and device arrays) and load it again with coopnn.load, which opens the "
                f"device anew. The loss was first reported as: {self.lost}")

    def result(self, result: int, call: str, accepted: tuple[int, ...] = (0,)) -> None:
        """`loader.check` of a raw call's VkResult, recording a loss."""
        try:
            check(vk, result, call, accepted)
        except DeviceLostError as e:
            self.record(e)
            raise


@dataclass(frozen=True)
class Device:
    handle: object
    physical_device: object
    info: DeviceInfo
    queue: object
    queue_family: int
    features: frozenset[str]
    extensions: frozenset[str]
    health: DeviceHealth


def create_device(tracker: ObjectTracker, physical_device, info: DeviceInfo, features: Iterable[str] = (),
                  extensions: Iterable[str] = ()) -> Device:
    """Create the device with `features` and `extensions` (plus the extensions those features live in)."""
    if info.unsuitable_reason is not None:
        raise BackendUnavailableError(f"{info.describe()} cannot be used: {info.unsuitable_reason}")
    features = frozenset(features)
    chain, feature_extensions = enable_chain(features)
    extensions = frozenset(extensions) | feature_extensions
    missing = (("features", sorted(f for f in features if not info.features.get(f))),
               ("extensions", sorted(extensions - info.extensions)))
    lacks = [f"{kind} {names}" for kind, names in missing if names]
    if lacks:
        raise BackendUnavailableError(f"{info.describe()} lacks {'; '.join(lacks)}")
    queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=info.compute_queue_family, pQueuePriorities=[1.0])
    create_info = vk.VkDeviceCreateInfo(pNext=chain.head, pQueueCreateInfos=[queue_info],
                                        ppEnabledExtensionNames=sorted(extensions))
    try:
        handle = vk.vkCreateDevice(physical_device, create_info, None)
    except vk.VkError as exc:
        raise BackendUnavailableError(f"{info.describe()} refused to create a device ({type(exc).__name__}) with "
                                      f"features {sorted(features)} and extensions {sorted(extensions)}") from exc
    tracker.add("VkDevice", lambda: vk.vkDestroyDevice(handle, None))
    return Device(handle=handle, physical_device=physical_device, info=info,
                  queue=vk.vkGetDeviceQueue(handle, info.compute_queue_family, 0),
                  queue_family=info.compute_queue_family, features=features, extensions=extensions,
                  health=DeviceHealth(info))


def extension_command(device: Device, name: str):
    """The device-level command `name` of an enabled extension, cast to its PFN type (the loader exports no extension
    commands: they come from vkGetDeviceProcAddr); BackendUnavailableError where the driver does not provide it."""
    pointer = vk.lib.vkGetDeviceProcAddr(device.handle, name.encode())
    if pointer == vk.ffi.NULL:
        raise BackendUnavailableError(f"{device.info.name}'s driver does not provide {name}")
    return vk.ffi.cast(f"PFN_{name}", pointer)
