"""`QueuedCopies`: buffer copies submitted on a lane of their own, ahead of the next submission on the queue.

Every submission this runtime records begins with a full barrier after earlier work on the queue (`record_commands`),
so whatever it submits next reads what these copies wrote. That lets a kept recording (a training step) take its
inputs from buffers that change with every call (a batch in new device arrays) without being recorded again: only the
few copy commands are recorded per call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from coopnn.runtime.vk.lane import Lane, copy_buffer
from coopnn.runtime.vk.loader import load_vulkan

if TYPE_CHECKING:
    from coopnn.runtime.vk.context import VulkanContext

vk = load_vulkan()
ffi, lib = vk.ffi, vk.lib


class QueuedCopies:
    """A lane of `context` submitting whole-range copies (source handle, destination handle, bytes) at offset 0."""

    def __init__(self, context: VulkanContext):
        self._lane = Lane(context.device, context.tracker, context.queue_lock)

    def submit(self, copies: Sequence[tuple[object, object, int]], before=None, after=None,
               wait: tuple[object, int] | None = None) -> None:
        """Submit `copies` without waiting for them (waiting first for the previous ones, whose command buffer this
        records again). `before` and `after`, arrays of VkBufferMemoryBarrier (queue-family ownership transfers of
        memory shared with another API), are recorded around them; `wait` = (timeline semaphore, value) holds them
        until another API has written their sources."""
        self._lane.wait()
        cmd = self._lane.begin()
        if before:
            _buffer_barriers(cmd, before)
        for source, destination, size in copies:
            copy_buffer(cmd, source, destination, 0, 0, size)
        if after:
            _buffer_barriers(cmd, after)
        self._lane.end()
        self._lane.submit(wait=wait)

    def destroy(self) -> None:
        self._lane.wait()
        self._lane.destroy()


def _buffer_barriers(cmd, barriers) -> None:
    lib.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 0,
                             ffi.NULL, len(barriers), barriers, 0, ffi.NULL)
