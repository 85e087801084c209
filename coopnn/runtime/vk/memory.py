"""Storage buffers and where their memory lives: `Buffer`, with `write()`/`read()` for the host side.

Three placements:
  DIRECT  one buffer in memory that is both device-local and host-visible (ReBAR, unified memory, CPU devices),
          persistently mapped: writes and reads touch it directly.
  STAGED  a device-local buffer plus a persistently mapped staging buffer; `write()` fills the staging buffer and the
          dispatcher records the copies in the same submission as the dispatch (uploads before, downloads after).
  DEVICE  device-local only (weights, scratch): `write()`/`read()` go through a temporary staging buffer in a
          submission of their own, which is fine for data written once.

`choose_placement` picks DIRECT only where it is fast: host reads need cached memory (reads of uncached device memory
over PCIe crawl), and a small host-visible device-local heap (the 256 MiB BAR window) is left alone. An explicit
`placement=Placement.DIRECT` takes any host-visible device-local memory.
"""

from __future__ import annotations

import enum
import itertools
import weakref
from typing import Protocol

import numpy as np

from coopnn.errors import BackendUnavailableError, DeviceMemoryError
from coopnn.runtime.copies import copy_rows
from coopnn.runtime.vk.device import Device
from coopnn.runtime.vk.device_info import DeviceInfo, MemoryType
from coopnn.runtime.vk.loader import load_vulkan
from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()

DEVICE_LOCAL = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
HOST_VISIBLE = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
HOST_COHERENT = vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
HOST_CACHED = vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT

# Vulkan 1.2 core values that pyvulkan 1.3.275 leaves unset (its aliases for them resolve to None).
BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT = 0x00020000
MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT = 0x00000002

STORAGE_USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
STAGING_USAGE = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT

buffer_serials = itertools.count()  # never reused: names buffers in caches (descriptor sets, recordings)

# Host-visible device-local heaps at most this large are the legacy BAR window, too small to hold batches.
BAR_WINDOW_BYTES = 256 << 20


class Placement(enum.Enum):
    DIRECT = "direct"
    STAGED = "staged"
    DEVICE = "device"


class BufferOwner(Protocol):
    """What buffers are made through: a `VulkanContext` or a scope of one. Named here rather than imported, because
    the context is built on this module."""

    info: DeviceInfo
    device: Device
    tracker: ObjectTracker

    def copy(self, src, dst, src_offset: int, dst_offset: int, nbytes: int) -> None:
        """Copy bytes between two VkBuffers now, after all earlier work on the queue."""


class HostAccess(enum.Flag):
    """What the host does with a buffer between dispatches."""

    NONE = 0
    WRITE = enum.auto()
    READ = enum.auto()
    READ_WRITE = WRITE | READ


def _fast_direct_type(info: DeviceInfo, host_reads: bool) -> MemoryType | None:
    """Host-visible device-local memory worth using for `choose_placement`: a large heap, cached if the host reads."""
    wanted = DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT | (HOST_CACHED if host_reads else 0)
    return next((t for t in info.memory_types if t.has(wanted) and t.heap_size > BAR_WINDOW_BYTES), None)


def _any_direct_type(info: DeviceInfo, host_reads: bool) -> MemoryType | None:
    """For an explicit DIRECT request: the fast type if there is one, else any host-visible device-local memory."""
    return _fast_direct_type(info, host_reads) or next(
        (t for t in info.memory_types if t.has(DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT)), None)


def choose_placement(info: DeviceInfo, host_access: HostAccess) -> Placement:
    if not host_access:
        return Placement.DEVICE
    return Placement.DIRECT if _fast_direct_type(info, HostAccess.READ in host_access) else Placement.STAGED


def _memory_type(info: DeviceInfo, allowed_bits: int, preferences: tuple[int, ...]) -> MemoryType:
    """The first memory type allowed by `allowed_bits` having the first satisfiable set of property flags."""
    for flags in preferences:
        for memory_type in info.memory_types:
            if allowed_bits & (1 << memory_type.index) and memory_type.has(flags):
                return memory_type
    raise BackendUnavailableError(
        f"{info.name} has no memory type with any of the properties {[hex(p) for p in preferences]}")


DEVICE_PREFERENCES = (DEVICE_LOCAL, 0)
UPLOAD_STAGING_PREFERENCES = (HOST_VISIBLE | HOST_COHERENT,)
DOWNLOAD_STAGING_PREFERENCES = (HOST_VISIBLE | HOST_COHERENT | HOST_CACHED, HOST_VISIBLE | HOST_COHERENT)


class RawBuffer:
    """One VkBuffer with its own VkDeviceMemory, optionally mapped; registered with the context's tracker."""

    def __init__(self, context: BufferOwner, size: int, usage: int, preferences: tuple[int, ...],
                 mapped: bool, device_address: bool = False):
        device = context.device.handle
        tracker = context.tracker
        if device_address:
            usage |= BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT
        self.size = size
        self.handle = vk.vkCreateBuffer(device, vk.VkBufferCreateInfo(
            size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        handle = self.handle
        self.tokens = [tracker.add("VkBuffer", lambda: vk.vkDestroyBuffer(device, handle, None))]
        try:
            requirements = vk.vkGetBufferMemoryRequirements(device, handle)
            self.memory_type = _memory_type(context.info, requirements.memoryTypeBits, preferences)
            memory = _allocate(context.info, device, requirements.size, self.memory_type, device_address)
            self.tokens.append(tracker.add("VkDeviceMemory", lambda: vk.vkFreeMemory(device, memory, None)))
            vk.vkBindBufferMemory(device, handle, memory, 0)
            # Mapped memory is unmapped by vkFreeMemory; the numpy view must not outlive the buffer.
            self.host = np.frombuffer(vk.vkMapMemory(device, memory, 0, size, 0), np.uint8) if mapped else None
            self.device_address = _device_address(device, handle) if device_address else None
        except BaseException:
            tracker.release_many(self.tokens)
            raise


def _allocate(info: DeviceInfo, device, size: int, memory_type: MemoryType, device_address: bool):
    flags_info = vk.VkMemoryAllocateFlagsInfo(flags=MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT) if device_address else None
    try:
        return vk.vkAllocateMemory(device, vk.VkMemoryAllocateInfo(
            pNext=flags_info, allocationSize=size, memoryTypeIndex=memory_type.index), None)
    except (vk.VkErrorOutOfDeviceMemory, vk.VkErrorOutOfHostMemory) as exc:
        raise DeviceMemoryError(
            f"{info.name} is out of memory allocating {size} bytes (memory type {memory_type.index}, heap of "
            f"{memory_type.heap_size} bytes); use smaller batches or free other GPU work") from exc


def _device_address(device, buffer) -> int:
    # pyvulkan's vkGetBufferDeviceAddress wrapper returns its argument, so the raw function is called.
    info = vk.ffi.new("VkBufferDeviceAddressInfo*", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                                     "buffer": buffer})
    return int(vk.lib.vkGetBufferDeviceAddress(device, info))


class Buffer:
    """A storage buffer of `size` bytes; see the module docstring for what `placement` means.

    `write(data, offset)` makes bytes visible to the next dispatch; `read(dtype, count, offset)` returns what the last
    dispatch left (for STAGED buffers, downloaded by the dispatcher when they are bound and readable). `upload()` and
    `download()` do the same but transfer at once, outside any dispatch. `device_address`
    (with the bufferDeviceAddress feature enabled) asks for the buffer's GPU address, e.g. for
    vkCmdConvertCooperativeVectorMatrixNV.
    """

    def __init__(self, context: BufferOwner, size: int, host_access: HostAccess = HostAccess.READ_WRITE,
                 placement: Placement | None = None, device_address: bool = False):
        limits = context.info.limits
        if size <= 0:
            raise ValueError(f"buffer size must be positive, got {size}")
        if size > min(limits.max_buffer_size, limits.max_memory_allocation_size):
            raise ValueError(f"buffer of {size} bytes exceeds {context.info.name}'s limit of "
                             f"{min(limits.max_buffer_size, limits.max_memory_allocation_size)} bytes")
        self.context = context
        self.size = size
        # never reused, unlike Vulkan handles and Python ids: keys descriptor-set caches
        self.serial = next(buffer_serials)
        self.host_access = host_access
        self.placement = placement or choose_placement(context.info, host_access)
        host_reads = HostAccess.READ in host_access
        if self.placement is Placement.DIRECT:
            memory_type = _any_direct_type(context.info, host_reads)
            if memory_type is None:
                raise ValueError(f"{context.info.name} has no host-visible device-local memory for DIRECT")
            self._device = RawBuffer(context, size, STORAGE_USAGE, (memory_type.property_flags,), mapped=True,
                                     device_address=device_address)
            self._staging = self._device
        else:
            self._device = RawBuffer(context, size, STORAGE_USAGE, DEVICE_PREFERENCES, mapped=False,
                                     device_address=device_address)
            self._staging = None
        if self.placement is Placement.STAGED:
            try:
                self._staging = RawBuffer(context, size, STAGING_USAGE, DOWNLOAD_STAGING_PREFERENCES if host_reads
                                          else UPLOAD_STAGING_PREFERENCES, mapped=True)
            except BaseException:
                context.tracker.release_many(self._device.tokens)
                raise
        self._pending_upload: tuple[int, int] | None = None
        tokens = self._device.tokens + (self._staging.tokens if self.placement is Placement.STAGED else [])
        self._release = weakref.finalize(self, context.tracker.release_many, tokens)

    @property
    def handle(self):
        """The VkBuffer shaders bind."""
        return self._device.handle

    @property
    def device_address(self) -> int | None:
        return self._device.device_address

    @property
    def staging_handle(self):
        """The staging VkBuffer of a STAGED buffer (None otherwise)."""
        return self._staging.handle if self.placement is Placement.STAGED else None

    def mapped(self, dtype, count: int) -> np.ndarray:
        """The first `count` items of the host-visible side (the buffer itself when DIRECT, its staging buffer when
        STAGED) as a numpy view, without copying: valid while the buffer lives, and only between submissions that
        use it. A STAGED buffer's staging side reaches the device through copies the caller records."""
        if self.placement is Placement.DEVICE:
            raise ValueError("a DEVICE buffer has no host-visible memory")
        dtype = np.dtype(dtype)
        self._check_range(0, count * dtype.itemsize)
        return self._staging.host[:count * dtype.itemsize].view(dtype)

    def write(self, data, offset: int = 0) -> None:
        """Copy `data` (bytes or a contiguous numpy array) to byte `offset` for the next dispatch."""
        source = as_bytes(data)
        self._check_range(offset, source.size)
        if self.placement is Placement.DEVICE:
            self._write_through_temporary_staging(source, offset)
            return
        copy_rows(self._staging.host[offset:offset + source.size], source)
        self._written(offset, source.size)

    def write_rows(self, rows: np.ndarray, dtype, offset: int = 0) -> None:
        """Copy the 2-D array `rows` (any strides and number type, cast to `dtype`) to byte `offset` for the next
        dispatch, as packed rows: split over several threads and read once (`coopnn.runtime.copies.copy_rows`)."""
        dtype = np.dtype(dtype)
        nbytes = rows.size * dtype.itemsize
        self._check_range(offset, nbytes)
        if self.placement is Placement.DEVICE:
            self.write(np.ascontiguousarray(rows, dtype), offset)
            return
        copy_rows(self._staging.host[offset:offset + nbytes].view(dtype).reshape(rows.shape), rows)
        self._written(offset, nbytes)

    def _written(self, offset: int, size: int) -> None:
        """Bytes [offset, offset + size) of the host side changed: a STAGED buffer uploads them with the next
        dispatch."""
        if self.placement is Placement.STAGED:
            start, stop = self._pending_upload or (offset, offset + size)
            self._pending_upload = (min(start, offset), max(stop, offset + size))

    def read(self, dtype=np.uint8, count: int | None = None, offset: int = 0) -> np.ndarray:
        """A copy of `count` items of `dtype` from byte `offset` (default: to the end of the buffer)."""
        dtype = np.dtype(dtype)
        count = (self.size - offset) // dtype.itemsize if count is None else count
        nbytes = count * dtype.itemsize
        self._check_range(offset, nbytes)
        if self.placement is Placement.DEVICE:
            return self._read_through_temporary_staging(offset, nbytes).view(dtype)
        return self._staging.host[offset:offset + nbytes].copy().view(dtype)

    def upload(self, data, offset: int = 0) -> None:
        """`write()` and copy to the device now, rather than with the next dispatch."""
        self.write(data, offset)
        self.flush()

    def flush(self) -> None:
        """Copy pending writes of a STAGED buffer to the device now (other placements have none)."""
        pending = self.take_pending_upload() if self.placement is Placement.STAGED else None
        if pending:
            start, stop = pending
            self.context.copy(self._staging.handle, self.handle, start, start, stop - start)

    def download(self, dtype=np.uint8, count: int | None = None, offset: int = 0) -> np.ndarray:
        """Like `read()`, but fetching a STAGED buffer's bytes from the device now (after flushing pending writes)."""
        if self.placement is Placement.STAGED:
            dtype = np.dtype(dtype)
            count = (self.size - offset) // dtype.itemsize if count is None else count
            self._check_range(offset, count * dtype.itemsize)
            self.flush()
            self.context.copy(self.handle, self._staging.handle, offset, offset, count * dtype.itemsize)
        return self.read(dtype, count, offset)

    def _write_through_temporary_staging(self, data: np.ndarray, offset: int) -> None:
        upload_through_staging(self.context, self.handle, offset, data)

    def _read_through_temporary_staging(self, offset: int, nbytes: int) -> np.ndarray:
        return download_through_staging(self.context, self.handle, offset, nbytes)

    def take_pending_upload(self) -> tuple[int, int] | None:
        """The (start, stop) byte range written since the last dispatch of a STAGED buffer, clearing it."""
        pending, self._pending_upload = self._pending_upload, None
        return pending

    def _check_range(self, offset: int, nbytes: int) -> None:
        if not self.alive:
            raise RuntimeError("the buffer was destroyed (or its VulkanContext closed)")
        if offset < 0 or offset + nbytes > self.size:
            raise ValueError(f"byte range [{offset}, {offset + nbytes}) is outside a buffer of {self.size} bytes")

    def destroy(self) -> None:
        """Free the Vulkan buffers and memory now; harmless if already done."""
        self._release()

    @property
    def alive(self) -> bool:
        return self._release.alive and self.context.tracker.alive(self._device.tokens[0])


def upload_through_staging(context: BufferOwner, handle, offset: int, data: np.ndarray) -> None:
    """Copy `data` (flat uint8) to byte `offset` of the device-only VkBuffer `handle` now, through a temporary
    staging buffer: for data written once (weights, device arrays)."""
    staging = RawBuffer(context, data.size, STAGING_USAGE, UPLOAD_STAGING_PREFERENCES, mapped=True)
    try:
        copy_rows(staging.host, data)
        context.copy(staging.handle, handle, 0, offset, data.size)
    finally:
        context.tracker.release_many(staging.tokens)


def download_through_staging(context: BufferOwner, handle, offset: int, nbytes: int) -> np.ndarray:
    """`nbytes` from byte `offset` of the device-only VkBuffer `handle`, as a new uint8 array, through a temporary
    staging buffer."""
    staging = RawBuffer(context, nbytes, STAGING_USAGE, DOWNLOAD_STAGING_PREFERENCES, mapped=True)
    try:
        context.copy(handle, staging.handle, offset, 0, nbytes)
        return staging.host.copy()
    finally:
        context.tracker.release_many(staging.tokens)


def as_bytes(data) -> np.ndarray:
    """`data` (bytes-like or numpy array) as a flat uint8 array, without copying when it is contiguous."""
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return np.frombuffer(data, np.uint8)
