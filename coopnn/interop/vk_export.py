"""Vulkan objects another API can share: device-local storage buffers whose memory is exported as an opaque POSIX fd
(VK_KHR_external_memory_fd), and timeline semaphores exported the same way (VK_KHR_external_semaphore_fd).

`ExportedBuffer` binds like `coopnn.runtime.vk.memory.Buffer` (it has `handle`, `size`, `serial`, `alive` and
`device_address`), so `ComputeKernel.descriptor_set` takes it; made with `device_address=True` it has a GPU address
(what vkCmdConvertCooperativeVectorMatrixNV reads from). Its memory is a dedicated allocation of its own, so an
importer maps exactly this buffer (CUDA is told so with CUDA_EXTERNAL_MEMORY_DEDICATED). Both kinds of object are
registered with the context's ObjectTracker: `context.live_objects()` counts them and closing the context destroys
whatever is left.

Each `export_fd()` returns a new fd holding its own reference to the object's payload: the payload outlives the Vulkan
object for as long as an importer holds it, which is what lets a CUDA tensor outlive its model. An importer that
succeeds owns the fd; after a failed import the caller closes it. The KHR entry points come from vkGetDeviceProcAddr
and are called raw, with every result checked into a typed coopnn error.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from coopnn.errors import BackendUnavailableError
from coopnn.runtime.vk.device import extension_command
from coopnn.runtime.vk.loader import check, load_vulkan
from coopnn.runtime.vk.memory import (BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT, MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT,
                                      HostAccess, Placement, _device_address, buffer_serials)

if TYPE_CHECKING:
    from coopnn.runtime.vk.context import VulkanContext

vk = load_vulkan()
ffi, lib = vk.ffi, vk.lib

REQUIRED_EXTENSIONS = ("VK_KHR_external_memory_fd", "VK_KHR_external_semaphore_fd")
REQUIRED_FEATURES = ("timelineSemaphore",)
MEMORY_HANDLE_TYPE = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT
SEMAPHORE_HANDLE_TYPE = vk.VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT
BUFFER_USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)


def interop_unavailable_reason(context: VulkanContext) -> str | None:
    """None when buffers and timeline semaphores of this context can be exported as opaque fds; otherwise why not."""
    name = context.info.name
    missing = [e for e in REQUIRED_EXTENSIONS if e not in context.device.extensions]
    missing += [f for f in REQUIRED_FEATURES if f not in context.device.features]
    if missing:
        listed = [e for e in REQUIRED_EXTENSIONS if e not in context.info.extensions]
        listed += [f for f in REQUIRED_FEATURES if not context.info.features.get(f)]
        why = f"{name} lacks {listed}" if listed else f"the model's Vulkan context was created without {missing}"
        return f"sharing memory with CUDA needs {', '.join(missing)}: {why}"
    physical_device = context.device.physical_device
    buffer_info = ffi.new("VkPhysicalDeviceExternalBufferInfo*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO, "usage": BUFFER_USAGE,
        "handleType": MEMORY_HANDLE_TYPE})
    buffer_properties = ffi.new("VkExternalBufferProperties*", {
        "sType": vk.VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES})
    lib.vkGetPhysicalDeviceExternalBufferProperties(physical_device, buffer_info, buffer_properties)
    if not buffer_properties.externalMemoryProperties.externalMemoryFeatures & \
            vk.VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT:
        return f"{name} cannot export storage buffers as opaque fds"
    timeline = ffi.new("VkSemaphoreTypeCreateInfo*", {
        "sType": vk.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, "semaphoreType": vk.VK_SEMAPHORE_TYPE_TIMELINE})
    semaphore_info = ffi.new("VkPhysicalDeviceExternalSemaphoreInfo*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO, "pNext": timeline,
        "handleType": SEMAPHORE_HANDLE_TYPE})
    semaphore_properties = ffi.new("VkExternalSemaphoreProperties*", {
        "sType": vk.VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES})
    lib.vkGetPhysicalDeviceExternalSemaphoreProperties(physical_device, semaphore_info, semaphore_properties)
    if not semaphore_properties.externalSemaphoreFeatures & vk.VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT:
        return f"{name} cannot export timeline semaphores as opaque fds"
    return None


def _device_local_type(context: VulkanContext, allowed_bits: int) -> int:
    for memory_type in context.info.memory_types:
        if allowed_bits & (1 << memory_type.index) and memory_type.has(vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT):
            return memory_type.index
    raise BackendUnavailableError(f"{context.info.name} has no device-local memory type for exportable buffers")


class ExportedBuffer:
    """A device-local storage buffer of `size` bytes in a dedicated allocation of `allocation_size` bytes whose memory
    can be exported as an opaque fd; in its own context it binds like a DEVICE `Buffer`. `device_address` (with the
    bufferDeviceAddress feature enabled on the context) gives it a GPU address."""

    placement = Placement.DEVICE
    host_access = HostAccess.NONE

    def __init__(self, context: VulkanContext, size: int, device_address: bool = False):
        limit = min(context.info.limits.max_buffer_size, context.info.limits.max_memory_allocation_size)
        if not 0 < size <= limit:
            raise ValueError(f"an exported buffer holds 1 to {limit} bytes on {context.info.name}, not {size}")
        device = context.device.handle
        tracker = context.tracker
        self.context = context
        self.size = size
        self.serial = next(buffer_serials)  # keys descriptor-set caches, like Buffer.serial
        external = ffi.new("VkExternalMemoryBufferCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, "handleTypes": MEMORY_HANDLE_TYPE})
        usage = BUFFER_USAGE | (BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT if device_address else 0)
        create_info = ffi.new("VkBufferCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "pNext": external, "size": size, "usage": usage,
            "sharingMode": vk.VK_SHARING_MODE_EXCLUSIVE})
        created = ffi.new("VkBuffer*")
        check(vk, lib.vkCreateBuffer(device, create_info, ffi.NULL, created), "vkCreateBuffer")
        handle = created[0]
        self.tokens = [tracker.add("VkBuffer", lambda: lib.vkDestroyBuffer(device, handle, ffi.NULL))]
        try:
            requirements = ffi.new("VkMemoryRequirements*")
            lib.vkGetBufferMemoryRequirements(device, handle, requirements)
            dedicated = ffi.new("VkMemoryDedicatedAllocateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO, "buffer": handle})
            flags = ffi.new("VkMemoryAllocateFlagsInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO, "pNext": dedicated,
                "flags": MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT})
            export = ffi.new("VkExportMemoryAllocateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
                "pNext": flags if device_address else dedicated, "handleTypes": MEMORY_HANDLE_TYPE})
            memory_type = _device_local_type(context, requirements.memoryTypeBits)
            allocate_info = ffi.new("VkMemoryAllocateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "pNext": export,
                "allocationSize": requirements.size, "memoryTypeIndex": memory_type})
            allocated = ffi.new("VkDeviceMemory*")
            check(vk, lib.vkAllocateMemory(device, allocate_info, ffi.NULL, allocated), "vkAllocateMemory")
            memory = allocated[0]
            self.tokens.append(tracker.add("VkDeviceMemory", lambda: lib.vkFreeMemory(device, memory, ffi.NULL)))
            check(vk, lib.vkBindBufferMemory(device, handle, memory, 0), "vkBindBufferMemory")
            self._get_fd = extension_command(context.device, "vkGetMemoryFdKHR")
        except BaseException:
            tracker.release_many(reversed(self.tokens))
            raise
        self.handle = handle
        self.device_address = _device_address(device, handle) if device_address else None
        self.allocation_size = requirements.size
        self.memory_type = memory_type
        self._memory = memory
        self._release = weakref.finalize(self, tracker.release_many, list(reversed(self.tokens)))

    def export_fd(self) -> int:
        """A new opaque fd referencing this buffer's memory; whoever imports it owns it."""
        info = ffi.new("VkMemoryGetFdInfoKHR*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR, "memory": self._memory,
            "handleType": MEMORY_HANDLE_TYPE})
        fd = ffi.new("int*")
        check(vk, self._get_fd(self.context.device.handle, info, fd), "vkGetMemoryFdKHR")
        return fd[0]

    def destroy(self) -> None:
        """Destroy the Vulkan buffer and free its memory object now (an importer keeps the payload); harmless when
        done already."""
        self._release()

    @property
    def alive(self) -> bool:
        return self._release.alive and self.context.tracker.alive(self.tokens[0])


class ExportedTimeline:
    """A timeline semaphore (starting at 0) that can be exported as an opaque fd."""

    def __init__(self, context: VulkanContext):
        device = context.device.handle
        tracker = context.tracker
        self.context = context
        export = ffi.new("VkExportSemaphoreCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO, "handleTypes": SEMAPHORE_HANDLE_TYPE})
        timeline = ffi.new("VkSemaphoreTypeCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, "pNext": export,
            "semaphoreType": vk.VK_SEMAPHORE_TYPE_TIMELINE, "initialValue": 0})
        create_info = ffi.new("VkSemaphoreCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, "pNext": timeline})
        created = ffi.new("VkSemaphore*")
        check(vk, lib.vkCreateSemaphore(device, create_info, ffi.NULL, created), "vkCreateSemaphore")
        handle = created[0]
        self.token = tracker.add("VkSemaphore", lambda: lib.vkDestroySemaphore(device, handle, ffi.NULL))
        try:
            self._get_fd = extension_command(context.device, "vkGetSemaphoreFdKHR")
        except BaseException:
            tracker.release(self.token)
            raise
        self.handle = handle
        self._release = weakref.finalize(self, tracker.release, self.token)

    def export_fd(self) -> int:
        """A new opaque fd referencing this semaphore's payload; whoever imports it owns it."""
        info = ffi.new("VkSemaphoreGetFdInfoKHR*", {
            "sType": vk.VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR, "semaphore": self.handle,
            "handleType": SEMAPHORE_HANDLE_TYPE})
        fd = ffi.new("int*")
        check(vk, self._get_fd(self.context.device.handle, info, fd), "vkGetSemaphoreFdKHR")
        return fd[0]

    def destroy(self) -> None:
        self._release()

    @property
    def alive(self) -> bool:
        return self._release.alive and self.context.tracker.alive(self.token)
