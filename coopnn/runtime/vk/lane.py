"""`Lane`: one command pool, command buffer, fence and timestamp pair: one submission that can be in flight while the
lanes beside it are.

A lane is used by one thread at a time (its owner holds it); lanes of one context record in parallel because each has
its own command pool, and they share the queue through the context's `queue_lock`, since vkQueueSubmit needs the queue
externally synchronised. Waiting polls the fence briefly before sleeping in vkWaitForFences: a small dispatch finishes
in microseconds, and waking from a blocking wait costs more than the dispatch. Every Vulkan result is checked and
becomes a typed coopnn error; a lost device is recorded in the device's `DeviceHealth`, and every later submission on
it fails at once.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import TYPE_CHECKING, Callable

from coopnn.errors import CoopnnError, DeviceLostError
from coopnn.runtime.vk.loader import check, load_vulkan, result_of

if TYPE_CHECKING:
    from coopnn.runtime.vk.device import Device
    from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()
ffi, lib = vk.ffi, vk.lib

# Longest a submission may run before it counts as hung (a 2^24-sample batch of the widest model takes under 1 s).
FENCE_TIMEOUT_NS = 600 * 10**9
# How long `wait` polls before sleeping in the driver (seconds), and how long each sleep lasts at most (ns).
SPIN_SECONDS = 200e-6
SLEEP_SLICE_NS = 10**9
# Recordings a lane keeps for resubmission: a slot's chunks of a repeated batch (offsets into the result included).
RECORDINGS = 16
VK_NOT_READY = 1
VK_TIMEOUT = 2

# (source stages, source accesses, destination stages, destination accesses) of each global memory barrier used.
BARRIERS = {
    # Orders this submission after everything earlier on the queue (the previous run's reads and writes).
    "after_previous_work": (vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_MEMORY_WRITE_BIT,
                            vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                            vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT),
    # Host writes to mapped memory, made visible to the shaders and copies of this submission.
    "host_to_device": (vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_WRITE_BIT,
                       vk.VK_PIPELINE_STAGE_TRANSFER_BIT | vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_SHADER_READ_BIT),
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
# Built once and never written again, so every lane and thread may pass them to vkCmdPipelineBarrier.
_BARRIER_STRUCTS = {
    name: (src_stage, dst_stage, ffi.new("VkMemoryBarrier*", {
        "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER, "srcAccessMask": src, "dstAccessMask": dst}))
    for name, (src_stage, src, dst_stage, dst) in BARRIERS.items()}


def barrier(cmd, name: str) -> None:
    """Record the global memory barrier `name` of BARRIERS."""
    src_stage, dst_stage, memory_barrier = _BARRIER_STRUCTS[name]
    lib.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, memory_barrier, 0, ffi.NULL, 0, ffi.NULL)


def copy_buffer(cmd, src, dst, src_offset: int, dst_offset: int, size: int) -> None:
    lib.vkCmdCopyBuffer(cmd, src, dst, 1, ffi.new("VkBufferCopy*", (src_offset, dst_offset, size)))


class Lane:
    """A command buffer with its own pool, a fence and two timestamp queries; see the module docstring."""

    def __init__(self, logical_device: Device, tracker: ObjectTracker, queue_lock: threading.Lock):
        device = logical_device.handle
        self.info = logical_device.info
        self._health = logical_device.health
        self._device = device
        self._queue = logical_device.queue
        self._queue_lock = queue_lock
        tokens = []
        try:
            pool = vk.vkCreateCommandPool(device, vk.VkCommandPoolCreateInfo(
                flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                queueFamilyIndex=logical_device.queue_family), None)
            tokens.append(tracker.add("VkCommandPool", lambda: vk.vkDestroyCommandPool(device, pool, None)))
            self.command_buffer = vk.vkAllocateCommandBuffers(device, vk.VkCommandBufferAllocateInfo(
                commandPool=pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
            fence = vk.vkCreateFence(device, vk.VkFenceCreateInfo(), None)
            tokens.append(tracker.add("VkFence", lambda: vk.vkDestroyFence(device, fence, None)))
            self._query_pool = None
            if self.info.timestamp_valid_bits:
                query_pool = vk.vkCreateQueryPool(device, vk.VkQueryPoolCreateInfo(
                    queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=2), None)
                tokens.append(tracker.add("VkQueryPool", lambda: vk.vkDestroyQueryPool(device, query_pool, None)))
                self._query_pool = query_pool
        except vk.VkError as exc:
            tracker.release_many(reversed(tokens))
            check(vk, result_of(vk, exc), "creating a command lane")
            raise
        self._fence = fence
        self._timestamp_mask = (1 << self.info.timestamp_valid_bits) - 1
        self._timestamps = ffi.new("uint64_t[2]")
        # Prebuilt structs for raw vk.lib calls: pyvulkan's wrappers convert every argument on every call, which
        # costs more host time than a small dispatch.
        self._command_buffers = ffi.new("VkCommandBuffer[1]", [self.command_buffer])
        self._fences = ffi.new("VkFence[1]", [fence])
        self._begin_info = ffi.new("VkCommandBufferBeginInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, "flags": 0})
        self._submit_info = ffi.new("VkSubmitInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": 1,
            "pCommandBuffers": self._command_buffers})
        self.in_flight = False
        self._pool = pool
        self._timeline: _TimelineSubmit | None = None
        self._recordings: dict = {}  # key -> command buffer, least recently used first
        self._release = weakref.finalize(self, tracker.release_many, list(reversed(tokens)))

    def begin(self):
        """Start recording anew into the lane's own command buffer (its previous recording is dropped) and make it the
        one `submit` sends; returns the command buffer."""
        self._command_buffers[0] = self.command_buffer
        check(vk, lib.vkBeginCommandBuffer(self.command_buffer, self._begin_info), "vkBeginCommandBuffer")
        return self.command_buffer

    def end(self) -> None:
        check(vk, lib.vkEndCommandBuffer(self._command_buffers[0]), "vkEndCommandBuffer")

    def secondary(self, record: Callable[[object], None]):
        """A secondary command buffer of the lane's pool (freed with it), recorded once by `record(command_buffer)`
        for primaries of this lane to execute, any number of times each (simultaneous use), as a one-element array
        for vkCmdExecuteCommands."""
        cmd = vk.vkAllocateCommandBuffers(self._device, vk.VkCommandBufferAllocateInfo(
            commandPool=self._pool, level=vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY, commandBufferCount=1))[0]
        inheritance = ffi.new("VkCommandBufferInheritanceInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO})
        begin = ffi.new("VkCommandBufferBeginInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            "flags": vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT, "pInheritanceInfo": inheritance})
        check(vk, lib.vkBeginCommandBuffer(cmd, begin), "vkBeginCommandBuffer")
        record(cmd)
        check(vk, lib.vkEndCommandBuffer(cmd), "vkEndCommandBuffer")
        return ffi.new("VkCommandBuffer[1]", [cmd])

    def use(self, key, record: Callable[[object], None]) -> None:
        """Make the recording named `key` the one `submit` sends, recording it with `record(command_buffer)` the first
        time; up to RECORDINGS are kept, and the least recently used one's command buffer is recorded anew."""
        cmd = self._recordings.pop(key, None)
        if cmd is None:
            if len(self._recordings) < RECORDINGS:
                cmd = vk.vkAllocateCommandBuffers(self._device, vk.VkCommandBufferAllocateInfo(
                    commandPool=self._pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
            else:
                cmd = self._recordings.pop(next(iter(self._recordings)))
            check(vk, lib.vkBeginCommandBuffer(cmd, self._begin_info), "vkBeginCommandBuffer")
            record(cmd)
            check(vk, lib.vkEndCommandBuffer(cmd), "vkEndCommandBuffer")
        self._recordings[key] = cmd
        self._command_buffers[0] = cmd

    def reset_timestamps(self, cmd) -> None:
        if self._query_pool is not None:
            lib.vkCmdResetQueryPool(cmd, self._query_pool, 0, 2)

    def timestamp(self, cmd, query: int) -> None:
        # ALL_COMMANDS: the first stamp waits for the uploads, the second for the dispatches, so the interval is the
        # dispatches alone.
        if self._query_pool is not None:
            lib.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, self._query_pool, query)

    def submit(self, wait: tuple[object, int] | None = None, signal=None) -> None:
        """Submit what was last recorded (a recording may be submitted again once the previous submission ended).

        `wait` = (timeline semaphore, value) holds the submission until the semaphore reaches the value; `signal` (an
        object with a timeline semaphore `handle` and the integer `value` it last reached) is signalled to its next
        value, counted up under the queue lock so that its values follow submission order. Both are for work shared
        with another API (`coopnn.interop`). DeviceLostError at once when the device was lost."""
        self._health.check()
        check(vk, lib.vkResetFences(self._device, 1, self._fences), "vkResetFences")
        info = self._submit_info if wait is None and signal is None else self._timeline_submit_info(wait, signal)
        with self._queue_lock:
            if signal is not None:
                self._timeline.signal_values[0] = signal.value + 1
            self._health.result(lib.vkQueueSubmit(self._queue, 1, info, self._fence), "vkQueueSubmit")
            if signal is not None:
                signal.value += 1
        self.in_flight = True

    def _timeline_submit_info(self, wait: tuple[object, int] | None, signal):
        """The submit info of `submit` with timeline semaphores, its structs made on first use and then refilled."""
        if self._timeline is None:
            self._timeline = _TimelineSubmit(self._command_buffers)
        return self._timeline.fill(wait, signal)

    def wait(self) -> None:
        """Until the submission has finished (DeviceLostError when the device is lost or it runs past the timeout).
        When the wait itself fails, the queue is drained (or found lost) before the error is raised, so that whatever
        the caller frees next is no longer in use on the GPU."""
        if not self.in_flight:
            return
        try:
            self._wait_for_fence()
        except CoopnnError as e:
            if isinstance(e, DeviceLostError):
                self._health.record(e)
            with self._queue_lock:
                lib.vkQueueWaitIdle(self._queue)  # its own failure changes nothing: the error is raised below
            self.in_flight = False
            raise

    def _wait_for_fence(self) -> None:
        spin_until = time.perf_counter() + SPIN_SECONDS
        while time.perf_counter() < spin_until:
            result = lib.vkGetFenceStatus(self._device, self._fence)
            if result == 0:
                self.in_flight = False
                return
            check(vk, result, "vkGetFenceStatus", accepted=(VK_NOT_READY,))
        waited_ns = 0
        while True:
            result = lib.vkWaitForFences(self._device, 1, self._fences, vk.VK_TRUE, SLEEP_SLICE_NS)
            if result == 0:
                self.in_flight = False
                return
            check(vk, result, "vkWaitForFences", accepted=(VK_TIMEOUT,))
            waited_ns += SLEEP_SLICE_NS
            if waited_ns >= FENCE_TIMEOUT_NS:
                raise DeviceLostError(f"a submission on {self.info.name} ran for more than "
                                      f"{FENCE_TIMEOUT_NS // 10**9} s; the GPU is hung or the batch is far too large")

    def run(self) -> None:
        """Submit the recording and wait for it."""
        self.submit()
        self.wait()

    def elapsed_ms(self) -> float | None:
        """GPU time between the two timestamps of the finished submission (None without timestamps)."""
        if self._query_pool is None:
            return None
        self._health.result(lib.vkGetQueryPoolResults(self._device, self._query_pool, 0, 2, 16, self._timestamps, 8,
                                                      vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT),
                            "vkGetQueryPoolResults")
        ticks = (self._timestamps[1] - self._timestamps[0]) & self._timestamp_mask
        return ticks * self.info.limits.timestamp_period_ns / 1e6

    def destroy(self) -> None:
        self._release()


class _TimelineSubmit:
    """A VkSubmitInfo with one waited and one signalled timeline semaphore (VkTimelineSemaphoreSubmitInfo)."""

    def __init__(self, command_buffers):
        self.wait_semaphores = ffi.new("VkSemaphore[1]")
        self.wait_values = ffi.new("uint64_t[1]")
        self.signal_semaphores = ffi.new("VkSemaphore[1]")
        self.signal_values = ffi.new("uint64_t[1]")
        self.wait_stages = ffi.new("VkPipelineStageFlags[1]", [vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT])
        self.timeline_info = ffi.new("VkTimelineSemaphoreSubmitInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
            "pWaitSemaphoreValues": self.wait_values, "pSignalSemaphoreValues": self.signal_values})
        self.info = ffi.new("VkSubmitInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "pNext": self.timeline_info,
            "pWaitSemaphores": self.wait_semaphores, "pWaitDstStageMask": self.wait_stages,
            "commandBufferCount": 1, "pCommandBuffers": command_buffers,
            "pSignalSemaphores": self.signal_semaphores})

    def fill(self, wait: tuple[object, int] | None, signal):
        waits, signals = int(wait is not None), int(signal is not None)
        if wait is not None:
            self.wait_semaphores[0], self.wait_values[0] = wait
        if signal is not None:
            self.signal_semaphores[0] = signal.handle
        self.timeline_info.waitSemaphoreValueCount = self.info.waitSemaphoreCount = waits
        self.timeline_info.signalSemaphoreValueCount = self.info.signalSemaphoreCount = signals
        return self.info
