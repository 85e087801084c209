"""`Slot`: one submission of the bridge that can be in flight, with the buffers it binds: its `Lane` (command pool and
buffer, fence, timestamp pair), descriptor sets, input buffers and the `inputs_ready` timeline CUDA signals once those
are filled. A slot is reused only after its previous submission has finished (`wait`).

Memory, inputs: each slot has one `SharedBuffer` per model input, grown by powers of two (`input_buffer`). The bridge
copies the caller's rows into it on the caller's stream (cuMemcpyDtoDAsync; cuMemcpy2DAsync for rows with padding).
Vulkan cannot read memory CUDA allocated (PyTorch's and CuPy's allocators do not make it exportable), so this one copy
stays. Batches larger than one dispatch may bind (`CudaBridge.chunk_limit`, from maxStorageBufferRange and the
group-count limit, not the executable's host-side chunk size) run chunk by chunk, each chunk writing into its slot's
own device buffers (`chunk_output`), copied (vkCmdCopyBuffer) into the pooled output in the same submission.

A recording acquires the shared buffers from the external queue family, runs a `Prologue` where the caller gives one,
dispatches, copies, and releases them; a submission waits for `inputs_ready` and signals the bridge's `done` timeline
(the ordering is in `cuda_bridge.py`). A recording is made once per kernel, descriptor set, push constants, group
count, copies and prologue, and resubmitted whenever a run needs the same again (up to `lane.RECORDINGS` a slot).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Callable

from coopnn.interop.cuda_driver import CudaDriver
from coopnn.interop.shared_objects import SharedBuffer, SharedTimeline, capacity
from coopnn.runtime.vk.lane import Lane, barrier, copy_buffer
from coopnn.runtime.vk.loader import load_vulkan
from coopnn.runtime.vk.memory import HostAccess

vk = load_vulkan()
ffi, lib = vk.ffi, vk.lib

# Descriptor sets a slot keeps, one per distinct list of buffers bound (outputs vary while callers hold earlier ones).
SETS_PER_SLOT = 4
QUEUE_FAMILY_EXTERNAL = vk.VK_QUEUE_FAMILY_EXTERNAL
_AFTER_PREVIOUS = ffi.new("VkMemoryBarrier*", {
    "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER, "srcAccessMask": vk.VK_ACCESS_MEMORY_WRITE_BIT,
    "dstAccessMask": vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT})


@dataclass(frozen=True)
class Prologue:
    """Commands a run records before its dispatch, on buffers CUDA shares (`buffers`, acquired with the run's own):
    `record(command_buffer)` records them, and `key` names what they do, so a recording holding them is reused only
    for the same prologue (a torch module's weight refresh: `coopnn.torch.weight_sync`)."""

    key: Any
    buffers: tuple
    record: Callable[[Any], None]


def ownership_barriers(buffers, source_family: int, destination_family: int, source_access: int,
                        destination_access: int):
    """Queue-family ownership transfers of whole buffers, between this queue's family and VK_QUEUE_FAMILY_EXTERNAL."""
    return ffi.new("VkBufferMemoryBarrier[]", [{
        "sType": vk.VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER, "srcAccessMask": source_access,
        "dstAccessMask": destination_access, "srcQueueFamilyIndex": source_family,
        "dstQueueFamilyIndex": destination_family, "buffer": buffer.handle, "offset": 0, "size": buffer.size}
        for buffer in buffers])


class Slot:
    """One submission that can be in flight, with the buffers it binds (module docstring). Made, and its CUDA side
    released, with the CUDA context current."""

    def __init__(self, context, driver: CudaDriver, input_count: int, output_count: int):
        self._context = context
        self._driver = driver
        self.lane = Lane(context.device, context.tracker, context.queue_lock)
        try:
            self.inputs_ready = SharedTimeline(context, driver)
        except BaseException:
            self.lane.destroy()
            raise
        self.inputs: list[SharedBuffer | None] = [None] * input_count
        self._sets: collections.OrderedDict[tuple[int, ...], tuple[Any, int]] = collections.OrderedDict()
        self._made_sets = 0
        self.recorded = None  # the key of the recording `submit` sends
        self.chunk_outputs: list[Any] = [None] * output_count  # plain device buffers, for batches of several chunks

    def wait(self) -> None:
        """Until this slot's last submission has finished."""
        self.lane.wait()

    def input_buffer(self, index: int, nbytes: int) -> SharedBuffer:
        """The buffer of input `index`, grown to hold at least `nbytes`; call once the slot has waited (`wait`)."""
        buffer = self.inputs[index]
        if buffer is None or buffer.size < nbytes:
            self.inputs[index] = None
            if buffer is not None:  # the slot's last submission, and the copies it waited for, are done
                buffer.release_cuda()
                buffer.release_vulkan()
            buffer = self.inputs[index] = SharedBuffer(
                self._context, self._driver, capacity(nbytes, self._context.info.limits.max_storage_buffer_range))
        return buffer

    def chunk_output(self, index: int, nbytes: int):
        """The slot's own device buffer the kernel writes output `index` of a chunk into, grown to `nbytes`."""
        buffer = self.chunk_outputs[index]
        if buffer is None or buffer.size < nbytes:
            self.chunk_outputs[index] = None
            if buffer is not None:
                buffer.destroy()
            buffer = self.chunk_outputs[index] = self._context.create_buffer(
                capacity(nbytes, self._context.info.limits.max_storage_buffer_range), HostAccess.NONE)
        return buffer

    def descriptor_set(self, kernel, buffers) -> tuple[Any, int]:
        """A descriptor set of this slot's own binding `buffers` (as the array vkCmdBindDescriptorSets takes) and the
        number it was made as. Only this slot's submissions use its sets and it has waited for the last one, so the
        oldest may be destroyed; recordings name the set by its number, so none binding a destroyed set is reused."""
        key = tuple(buffer.serial for buffer in buffers)
        found = self._sets.get(key)
        if found is None:
            if len(self._sets) >= SETS_PER_SLOT:
                self._sets.popitem(last=False)[1][0].destroy()
            self._made_sets += 1
            found = self._sets[key] = (kernel.dedicated_descriptor_set(buffers), self._made_sets)
        else:
            self._sets.move_to_end(key)
        return found[0].handle, found[1]

    def record(self, kernel, buffers, shared, push: bytes, groups: int, copies, prologue: Prologue | None = None):
        """Make one dispatch of `kernel` over `buffers` what `submit` sends: `shared` are the buffers CUDA also uses
        (taken from and handed back to the external queue family); `copies` are (source, destination, offset, size)
        copied after; `prologue` runs before. A recording is made once per set of these and submitted again after
        (`Lane.use`): recording is host work that a repeated call need not redo."""
        descriptor_set, set_number = self.descriptor_set(kernel, buffers)
        key = (id(kernel), set_number, push, groups, tuple((a.serial, b.serial, o, n) for a, b, o, n in copies),
               None if prologue is None else prologue.key)
        self.lane.use(key, lambda cmd: self._record(cmd, kernel, descriptor_set, shared, push, groups, copies,
                                                    prologue))
        self.recorded = key

    def _record(self, cmd, kernel, descriptor_set, shared, push: bytes, groups: int, copies,
                prologue: Prologue | None) -> None:
        family = self._context.device.queue_family
        shared = list(shared) + ([] if prologue is None else list(prologue.buffers))
        acquire = ownership_barriers(shared, QUEUE_FAMILY_EXTERNAL, family, 0,
                                     vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT)
        # earlier submissions' writes (weights converted in place, this bridge's previous runs) become visible
        lib.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0,
                                 1, _AFTER_PREVIOUS, len(shared), acquire, 0, ffi.NULL)
        if prologue is not None:
            prologue.record(cmd)
            barrier(cmd, "after_previous_work")
        self.lane.reset_timestamps(cmd)
        self.lane.timestamp(cmd, 0)
        lib.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, kernel.pipeline)
        lib.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, kernel.layout, 0, 1, descriptor_set, 0,
                                    ffi.NULL)
        if push:
            lib.vkCmdPushConstants(cmd, kernel.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push),
                                   ffi.from_buffer(push))
        lib.vkCmdDispatch(cmd, groups, 1, 1)
        self.lane.timestamp(cmd, 1)
        if copies:
            barrier(cmd, "shaders_to_downloads")
            for source, destination, offset, size in copies:
                copy_buffer(cmd, source.handle, destination.handle, 0, offset, size)
        release = ownership_barriers(shared, family, QUEUE_FAMILY_EXTERNAL,
                                     vk.VK_ACCESS_MEMORY_WRITE_BIT, 0)
        lib.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0,
                                 0, ffi.NULL, len(shared), release, 0, ffi.NULL)

    def submit(self, wait_value: int, done: SharedTimeline) -> None:
        """Submit the recording: it waits for `inputs_ready` to reach `wait_value` and signals `done` to its next
        value (`Lane.submit` counts it under the queue lock, so that values follow submission order)."""
        self.lane.submit(wait=(self.inputs_ready.handle, wait_value), signal=done)

    def elapsed_ms(self) -> float | None:
        """GPU time of the last dispatch (waits for it to finish); None without timestamps."""
        self.lane.wait()
        return self.lane.elapsed_ms()

    def release_cuda(self) -> None:
        for buffer in self.inputs:
            if buffer is not None:
                buffer.release_cuda()
        self.inputs_ready.release_cuda()

    def release_vulkan(self) -> None:
        for descriptor_set, _ in self._sets.values():
            descriptor_set.destroy()
        for buffer in self.inputs:
            if buffer is not None:
                buffer.release_vulkan()
        for buffer in self.chunk_outputs:
            if buffer is not None:
                buffer.destroy()
        self.inputs_ready.release_vulkan()
        self.lane.destroy()

