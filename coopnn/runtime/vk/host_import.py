"""Host memory the GPU writes in place: a page-aligned host allocation imported as a Vulkan buffer
(VK_EXT_external_memory_host), so that the copy after a dispatch lands in the user's result array itself.

Only memory coopnn owns is imported (the pooled output blocks of `coopnn.runtime.host_arrays`): an import must not
outlive the memory behind it, and coopnn alone knows when its blocks go back to the system. The import's buffer and
memory are registered with the context's tracker, so closing the context releases them like any other object.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from coopnn.runtime.vk.loader import check, load_vulkan, result_of
from coopnn.runtime.vk.memory import buffer_serials
from coopnn.runtime.vk.tracking import TrackedHandles

if TYPE_CHECKING:
    from coopnn.runtime.vk.context import VulkanContext

vk = load_vulkan()
ffi = vk.ffi

EXTENSION = "VK_EXT_external_memory_host"
HOST_ALLOCATION = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT


@functools.lru_cache(maxsize=None)
def _alignment(physical_device_address: int) -> int:
    properties = ffi.new("VkPhysicalDeviceExternalMemoryHostPropertiesEXT*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT})
    chain = ffi.new("VkPhysicalDeviceProperties2*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": properties})
    vk.lib.vkGetPhysicalDeviceProperties2(ffi.cast("VkPhysicalDevice", physical_device_address), chain)
    return int(properties.minImportedHostPointerAlignment)


def import_alignment(context: VulkanContext) -> int | None:
    """The alignment an imported pointer and size need on this context's device; None without the extension."""
    if EXTENSION not in context.device.extensions:
        return None
    return _alignment(int(ffi.cast("uintptr_t", context.device.physical_device)))


class ImportedHostBuffer(TrackedHandles):
    """A transfer-destination VkBuffer over `size` bytes of host memory at `address` (both aligned as
    `import_alignment` says), valid while that memory is."""

    def __init__(self, context: VulkanContext, address: int, size: int):
        device = context.device.handle
        tracker = context.tracker
        pointer = ffi.cast("void*", address)
        get_properties = vk.vkGetDeviceProcAddr(device, "vkGetMemoryHostPointerPropertiesEXT")
        host_properties = ffi.new("VkMemoryHostPointerPropertiesEXT*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT})
        try:
            get_properties(device, HOST_ALLOCATION, pointer, host_properties)
        except vk.VkError as exc:
            check(vk, result_of(vk, exc), "vkGetMemoryHostPointerPropertiesEXT")
        external = vk.VkExternalMemoryBufferCreateInfo(handleTypes=HOST_ALLOCATION)
        self.size = size
        self.serial = next(buffer_serials)
        self.handle = vk.vkCreateBuffer(device, vk.VkBufferCreateInfo(
            pNext=external, size=size, usage=vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        handle = self.handle
        tokens = [tracker.add("VkBuffer", lambda: vk.vkDestroyBuffer(device, handle, None))]
        try:
            requirements = vk.vkGetBufferMemoryRequirements(device, handle)
            allowed = requirements.memoryTypeBits & host_properties.memoryTypeBits
            if not allowed:
                raise ValueError(f"{context.info.name} offers no memory type to import host memory for a buffer")
            memory_type = (allowed & -allowed).bit_length() - 1
            import_info = vk.VkImportMemoryHostPointerInfoEXT(handleType=HOST_ALLOCATION, pHostPointer=pointer)
            memory = vk.vkAllocateMemory(device, vk.VkMemoryAllocateInfo(
                pNext=import_info, allocationSize=size, memoryTypeIndex=memory_type), None)
            tokens.append(tracker.add("VkDeviceMemory", lambda: vk.vkFreeMemory(device, memory, None)))
            vk.vkBindBufferMemory(device, handle, memory, 0)
        except vk.VkError as exc:
            tracker.release_many(tokens)
            check(vk, result_of(vk, exc), "importing host memory")
        except BaseException:
            tracker.release_many(tokens)
            raise
        self._track(tracker, tokens)
