"""`Dispatcher`: one command buffer, one fence and a timestamp query pool, reused by every submission.

`run()` records a whole step into one submission: pending uploads of STAGED buffers, the dispatches (with a barrier
between consecutive ones), downloads of readable STAGED buffers, and a barrier making device writes visible to the
host; it waits on the fence and returns the GPU time between the two timestamps around the dispatches. Nothing is
allocated on the Vulkan side per call. `submit()` runs any other recording (one-off transfers) the same way.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from coopnn.runtime.vk.loader import check, load_vulkan
from coopnn.runtime.vk.memory import HostAccess, Placement

if TYPE_CHECKING:
    from coopnn.runtime.vk.device import Device
    from coopnn.runtime.vk.device_info import DeviceInfo
    from coopnn.runtime.vk.memory import Buffer
    from coopnn.runtime.vk.pipeline import ComputeKernel
    from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()
ffi, lib = vk.ffi, vk.lib

FENCE_TIMEOUT_NS = 600 * 10**9

# (source stages, source accesses, destination stages, destination accesses) of each global memory barrier used.
BARRIERS = {
    # Orders this submission after everything earlier on the queue (the previous run's reads and writes).
    "after_previous_work": (vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_MEMORY_WRITE_BIT,
                            vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                            vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT),
    "uploads_to_shaders": (vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                           vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                           vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT),
    "between_dispatches": (vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT,
                           vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                           vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT),
    "shaders_to_downloads": (vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT,
                             vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT),
    "device_to_host": (vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_MEMORY_WRITE_BIT,
                       vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_READ_BIT),
}


@dataclass(frozen=True, eq=False)
class Dispatch:
    """One vkCmdDispatch of `kernel` over `buffers` (bindings 0..N-1) with `push_constants` bytes."""

    kernel: ComputeKernel
    buffers: tuple[Buffer, ...]
    push_constants: bytes | np.ndarray = b""
    group_count: int | tuple[int, int, int] = 1


@dataclass(frozen=True, eq=False)
class Recorded:
    """Commands other than dispatches recorded in a run's sequence (buffer fills, copies, matrix conversions) by
    `record(command_buffer)`; full memory barriers order them against the dispatches around them."""

    record: Callable[[object], None]


class Dispatcher:
    """Records and submits work on the context's compute queue, one submission at a time."""

    def __init__(self, logical_device: Device, tracker: ObjectTracker):
        device = logical_device.handle
        self.info = logical_device.info
        self._device = device
        self._queue = logical_device.queue
        pool = vk.vkCreateCommandPool(device, vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=logical_device.queue_family),
            None)
        tokens = [tracker.add("VkCommandPool", lambda: vk.vkDestroyCommandPool(device, pool, None))]
        self._command_buffer = vk.vkAllocateCommandBuffers(device, vk.VkCommandBufferAllocateInfo(
            commandPool=pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        fence = vk.vkCreateFence(device, vk.VkFenceCreateInfo(), None)
        tokens.append(tracker.add("VkFence", lambda: vk.vkDestroyFence(device, fence, None)))
        self._fence = fence
        self._timestamp_mask = (1 << self.info.timestamp_valid_bits) - 1
        self._query_pool = None
        if self.info.timestamp_valid_bits:
            query_pool = vk.vkCreateQueryPool(device, vk.VkQueryPoolCreateInfo(
                queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=2), None)
            tokens.append(tracker.add("VkQueryPool", lambda: vk.vkDestroyQueryPool(device, query_pool, None)))
            self._query_pool = query_pool
        self._timestamps = ffi.new("uint64_t[2]")
        # The hot path calls vk.lib directly with these prebuilt structs: pyvulkan's wrappers convert every argument
        # on every call, which costs more host time than lavapipe's whole dispatch.
        self._command_buffers = ffi.new("VkCommandBuffer[1]", [self._command_buffer])
        self._fences = ffi.new("VkFence[1]", [fence])
        self._begin_info = ffi.new("VkCommandBufferBeginInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            "flags": vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT})
        self._submit_info = ffi.new("VkSubmitInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": 1,
            "pCommandBuffers": self._command_buffers})
        self._barriers = {
            name: (src_stage, dst_stage, ffi.new("VkMemoryBarrier*", {
                "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER, "srcAccessMask": src, "dstAccessMask": dst}))
            for name, (src_stage, src, dst_stage, dst) in BARRIERS.items()}
        self._release = weakref.finalize(self, tracker.release_many, list(reversed(tokens)))

    def submit(self, record: Callable[[object], None]) -> None:
        """Record with `record(command_buffer)`, submit, and wait until the GPU is done."""
        cmd = self._command_buffer
        check(vk, lib.vkBeginCommandBuffer(cmd, self._begin_info), "vkBeginCommandBuffer")
        record(cmd)
        check(vk, lib.vkEndCommandBuffer(cmd), "vkEndCommandBuffer")
        check(vk, lib.vkResetFences(self._device, 1, self._fences), "vkResetFences")
        check(vk, lib.vkQueueSubmit(self._queue, 1, self._submit_info, self._fence), "vkQueueSubmit")
        check(vk, lib.vkWaitForFences(self._device, 1, self._fences, vk.VK_TRUE, FENCE_TIMEOUT_NS), "vkWaitForFences")

    def barrier(self, cmd, name: str) -> None:
        src_stage, dst_stage, memory_barrier = self._barriers[name]
        lib.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, memory_barrier, 0, ffi.NULL, 0, ffi.NULL)

    def run(self, steps: Sequence[Dispatch | Recorded],
            downloads: Mapping[Buffer, tuple[int, int]] | None = None) -> float | None:
        """Upload, dispatch and download in one submission; the dispatches' GPU time in ms (None if the queue has no
        timestamps). `steps` are dispatches, and recorded commands run between them in order.

        `downloads` maps STAGED buffers to the (offset, size) byte range to bring back; by default every bound STAGED
        buffer the host reads comes back whole.
        """
        dispatches = [d for d in steps if isinstance(d, Dispatch)]
        bound = list(dict.fromkeys(b for d in dispatches for b in d.buffers))
        _check_descriptor_capacity(dispatches)
        if downloads is None:
            downloads = {b: (0, b.size) for b in bound
                         if b.placement is Placement.STAGED and HostAccess.READ in b.host_access}
        _check_downloads(downloads)
        commands = [d if isinstance(d, Recorded) else
                    (d.kernel, d.kernel.descriptor_set(d.buffers), _push_bytes(d), _group_count(self.info, d))
                    for d in steps]
        # Taken only once every dispatch has been checked, so a refused run leaves pending uploads pending.
        uploads = [(b, r) for b in bound if b.placement is Placement.STAGED for r in [b.take_pending_upload()] if r]

        def record(cmd) -> None:
            self.barrier(cmd, "after_previous_work")
            if self._query_pool is not None:
                lib.vkCmdResetQueryPool(cmd, self._query_pool, 0, 2)
            for buffer, (start, stop) in uploads:
                _copy(cmd, buffer.staging_handle, buffer.handle, start, start, stop - start)
            if uploads:
                self.barrier(cmd, "uploads_to_shaders")
            self._timestamp(cmd, 0)
            for index, command in enumerate(commands):
                recorded = isinstance(command, Recorded)
                if index:
                    after_recorded = isinstance(commands[index - 1], Recorded)
                    self.barrier(cmd, "after_previous_work" if recorded or after_recorded else "between_dispatches")
                if recorded:
                    command.record(cmd)
                    continue
                kernel, descriptor_sets, push, groups = command
                lib.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, kernel.pipeline)
                lib.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, kernel.layout, 0, 1,
                                            descriptor_sets, 0, ffi.NULL)
                if push is not None:
                    lib.vkCmdPushConstants(cmd, kernel.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push), push)
                lib.vkCmdDispatch(cmd, *groups)
            self._timestamp(cmd, 1)
            if downloads:
                self.barrier(cmd, "shaders_to_downloads")
            for buffer, (offset, size) in downloads.items():
                _copy(cmd, buffer.handle, buffer.staging_handle, offset, offset, size)
            self.barrier(cmd, "device_to_host")

        self.submit(record)
        return self._elapsed_ms()

    def _timestamp(self, cmd, query: int) -> None:
        # ALL_COMMANDS: the first stamp waits for the uploads, the second for the dispatches, so the interval is the
        # dispatches alone.
        if self._query_pool is not None:
            lib.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, self._query_pool, query)

    def _elapsed_ms(self) -> float | None:
        if self._query_pool is None:
            return None
        check(vk, lib.vkGetQueryPoolResults(self._device, self._query_pool, 0, 2, 16, self._timestamps, 8,
                                            vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT),
              "vkGetQueryPoolResults")
        ticks = (self._timestamps[1] - self._timestamps[0]) & self._timestamp_mask
        return ticks * self.info.limits.timestamp_period_ns / 1e6

    def destroy(self) -> None:
        self._release()


def _copy(cmd, src, dst, src_offset: int, dst_offset: int, size: int) -> None:
    lib.vkCmdCopyBuffer(cmd, src, dst, 1, ffi.new("VkBufferCopy*", (src_offset, dst_offset, size)))


def _push_bytes(dispatch: Dispatch):
    """The dispatch's push constants as an FFI buffer of exactly the kernel's push-constant size (None if zero)."""
    data = dispatch.push_constants
    raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    size = dispatch.kernel.push_constant_size
    if len(raw) != size:
        raise ValueError(f"{dispatch.kernel.name} takes {size} bytes of push constants, got {len(raw)}")
    return ffi.from_buffer(raw) if size else None


def _group_count(info: DeviceInfo, dispatch: Dispatch) -> tuple[int, int, int]:
    groups = (dispatch.group_count, 1, 1) if isinstance(dispatch.group_count, int) else tuple(dispatch.group_count)
    limit = info.limits.max_compute_work_group_count
    if len(groups) != 3 or any(g < 1 or g > m for g, m in zip(groups, limit)):
        raise ValueError(f"{dispatch.kernel.name}: group count {groups} outside 1..maxComputeWorkGroupCount={limit}; "
                         f"split the batch")
    return groups


def _check_downloads(downloads: Mapping[Buffer, tuple[int, int]]) -> None:
    for buffer, (offset, size) in downloads.items():
        if buffer.placement is not Placement.STAGED:
            raise ValueError(f"only STAGED buffers are downloaded; this one is {buffer.placement.name}")
        if offset < 0 or size <= 0 or offset + size > buffer.size:
            raise ValueError(f"download range ({offset}, {size}) does not fit a buffer of {buffer.size} bytes")


def _check_descriptor_capacity(dispatches: Sequence[Dispatch]) -> None:
    """A kernel's cached descriptor sets are recycled least-recently-used first, which is only safe while one
    submission binds it to no more distinct buffer lists than it keeps sets for."""
    distinct: dict[int, set] = {}
    for d in dispatches:
        distinct.setdefault(id(d.kernel), set()).add(tuple(b.serial for b in d.buffers))
    for d in dispatches:
        if len(distinct[id(d.kernel)]) > d.kernel.descriptor_set_capacity:
            raise ValueError(f"one submission binds {d.kernel.name} to more than {d.kernel.descriptor_set_capacity} "
                             f"different buffer lists")
