"""The logical device: exactly the features and extensions asked for, and one compute queue.

A feature is named as in the Vulkan spec ("shaderFloat16", "cooperativeVector", ...); the struct holding it is found
in `chain.FEATURE_OWNER`, and the extension that struct belongs to is enabled with it. Anything the device lacks raises
BackendUnavailableError naming the device and what it lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from coopnn.errors import BackendUnavailableError
from coopnn.runtime.vk.chain import enable_chain
from coopnn.runtime.vk.device_info import DeviceInfo
from coopnn.runtime.vk.loader import load_vulkan
from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()


@dataclass(frozen=True)
class Device:
    handle: object
    physical_device: object
    info: DeviceInfo
    queue: object
    queue_family: int
    features: frozenset[str]
    extensions: frozenset[str]


def create_device(tracker: ObjectTracker, physical_device, info: DeviceInfo, features: Iterable[str] = (),
                  extensions: Iterable[str] = ()) -> Device:
    """Create the device with `features` and `extensions` (plus the extensions those features live in)."""
    if info.unsuitable_reason is not None:
        raise BackendUnavailableError(f"{info.describe()} cannot be used: {info.unsuitable_reason}")
    features = frozenset(features)
    chain, feature_extensions = enable_chain(features)
    extensions = frozenset(extensions) | feature_extensions
    missing_features = sorted(f for f in features if not info.features.get(f))
    missing_extensions = sorted(extensions - info.extensions)
    if missing_features or missing_extensions:
        raise BackendUnavailableError(
            f"{info.describe()} lacks " + "; ".join(
                part for part in (f"features {missing_features}" if missing_features else "",
                                  f"extensions {missing_extensions}" if missing_extensions else "") if part))
    queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=info.compute_queue_family, pQueuePriorities=[1.0])
    create_info = vk.VkDeviceCreateInfo(pNext=chain.head, pQueueCreateInfos=[queue_info],
                                        ppEnabledExtensionNames=sorted(extensions))
    handle = vk.vkCreateDevice(physical_device, create_info, None)

    tracker.add("VkDevice", lambda: vk.vkDestroyDevice(handle, None))
    return Device(handle=handle, physical_device=physical_device, info=info,
                  queue=vk.vkGetDeviceQueue(handle, info.compute_queue_family, 0),
                  queue_family=info.compute_queue_family, features=features, extensions=extensions)
