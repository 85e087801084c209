"""A buffer of one Vulkan context that another context of the same physical device exported as an opaque fd
(VK_KHR_external_memory_fd): both address the same device memory, with no copy.

The exporter's allocation was dedicated to its buffer, so the import is dedicated too, with the exporter's size and
memory type (indices agree between devices created from one physical device). The import holds its own reference to
the memory: it stays valid when the exporter goes, until this buffer is destroyed (or its context closes).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

from coopnn.runtime.vk.loader import check, load_vulkan
from coopnn.runtime.vk.memory import HostAccess, Placement, buffer_serials
from coopnn.runtime.vk.tracking import TrackedHandles

if TYPE_CHECKING:
    from coopnn.runtime.vk.context import VulkanContext

vk = load_vulkan()
ffi, lib = vk.ffi, vk.lib

EXTENSION = "VK_KHR_external_memory_fd"
OPAQUE_FD = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT
USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
         | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)


class ExportedMemory(Protocol):
    """What an import reads of the exporter's buffer (`coopnn.interop.vk_export.ExportedBuffer`, which belongs to
    the layer above)."""

    size: int
    allocation_size: int
    memory_type: int

    def export_fd(self) -> int:
        """A new opaque fd referencing the buffer's memory, owned by whoever imports it."""


class ImportedFdBuffer(TrackedHandles):
    """`exported`'s memory as a storage buffer of `context`; binds like a DEVICE `Buffer`."""

    placement = Placement.DEVICE
    host_access = HostAccess.NONE

    def __init__(self, context: VulkanContext, exported: ExportedMemory):
        device = context.device.handle
        tracker = context.tracker
        self.size = exported.size
        self.serial = next(buffer_serials)
        external = ffi.new("VkExternalMemoryBufferCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, "handleTypes": OPAQUE_FD})
        create_info = ffi.new("VkBufferCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "pNext": external, "size": exported.size,
            "usage": USAGE, "sharingMode": vk.VK_SHARING_MODE_EXCLUSIVE})
        created = ffi.new("VkBuffer*")
        check(vk, lib.vkCreateBuffer(device, create_info, ffi.NULL, created), "vkCreateBuffer")
        handle = created[0]
        tokens = [tracker.add("VkBuffer", lambda: lib.vkDestroyBuffer(device, handle, ffi.NULL))]
        fd = exported.export_fd()
        try:
            dedicated = ffi.new("VkMemoryDedicatedAllocateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO, "buffer": handle})
            import_info = ffi.new("VkImportMemoryFdInfoKHR*", {
                "sType": vk.VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR, "pNext": dedicated,
                "handleType": OPAQUE_FD, "fd": fd})
            allocate_info = ffi.new("VkMemoryAllocateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "pNext": import_info,
                "allocationSize": exported.allocation_size, "memoryTypeIndex": exported.memory_type})
            allocated = ffi.new("VkDeviceMemory*")
            result = lib.vkAllocateMemory(device, allocate_info, ffi.NULL, allocated)
            if result == 0:
                fd = -1  # the driver owns it now
            check(vk, result, "vkAllocateMemory (importing an opaque fd)")
            memory = allocated[0]
            tokens.append(tracker.add("VkDeviceMemory", lambda: lib.vkFreeMemory(device, memory, ffi.NULL)))
            check(vk, lib.vkBindBufferMemory(device, handle, memory, 0), "vkBindBufferMemory")
        except BaseException:
            tracker.release_many(tokens)
            raise
        finally:
            if fd >= 0:
                os.close(fd)
        self.handle = handle
        self._track(tracker, tokens)
