"""`CudaBridge`: runs a `KernelExecutable`'s kernel on CUDA arrays (PyTorch, CuPy, ...) without a trip through the host.

Memory. Every buffer the kernel binds here is a device-local Vulkan buffer whose memory is exported as an opaque fd
(`vk_export.ExportedBuffer`) and imported once into CUDA (cuImportExternalMemory, cuExternalMemoryGetMappedBuffer),
so both APIs address the same bytes, in the primary CUDA context of the device whose UUID is the Vulkan device's.
  - Inputs: each of the SLOTS in-flight slots has one buffer per model input, grown by powers of two. A run copies the
    caller's rows into it on the caller's stream (cuMemcpyDtoDAsync; cuMemcpy2DAsync for rows with padding). Vulkan
    cannot read memory CUDA allocated (PyTorch's and CuPy's allocators do not make it exportable), so this one copy
    stays.
  - Outputs: the kernel writes into buffers of the bridge's output pool, and the caller gets each back as an array of
    its framework viewing that buffer: no copy. Batches larger than one dispatch may bind (`chunk_limit`, from
    maxStorageBufferRange and the group-count limit, not the executable's host-side chunk size) run chunk by chunk,
    each chunk writing into its slot's own buffers, copied (vkCmdCopyBuffer) into the pooled output in the same
    submission.

Ordering, all on the GPU, with timeline semaphores exported from Vulkan and imported into CUDA:
  1. on the caller's stream: the input copies, then a signal of the slot's `inputs_ready` timeline to the slot's next
     value (cuSignalExternalSemaphoresAsync);
  2. on the Vulkan queue: a submission that waits for that value, acquires the shared buffers from the external queue
     family, dispatches, releases them, and signals the bridge's `done` timeline; only the queue signals `done`, in
     submission order, so its values only grow;
  3. on the caller's stream: a wait for that value (cuWaitExternalSemaphoresAsync), so whatever the caller queues after
     `run` sees the outputs.
The host does not wait for the GPU in a run, except to reuse a slot whose previous submission is still running (the
host is then SLOTS runs ahead). A slot's `inputs_ready` values only grow because a slot is reused only after its
previous submission, which waited for the previous value, has finished.
Cost: each run hands the GPU from the CUDA context to Vulkan's and back. On an H100 (driver 580.159) each hand-off
took about 0.16 ms (an empty CUDA -> Vulkan -> CUDA round trip 0.31 ms, with timeline or binary semaphores alike,
against 2.5 us for a CUDA signal and wait), which dominates small batches; the queue-family ownership barriers cost
nothing measurable, and having the host wait for the copies before submitting, or order both APIs itself, was slower.

Lifetimes:
  - An output array keeps its buffer alive. When it is collected the buffer returns to the pool, to be written again
    only by a later run on the same stream: stream order then puts the kernel's next write after every use queued on
    that stream before the array was dropped. Using an output on another stream is the caller's to synchronise before
    dropping it, as with PyTorch's caching allocator. Beyond IDLE_LIMIT pooled buffers, the oldest are freed at the
    next run, after a cuCtxSynchronize.
  - Reuse across calls: slots, semaphores and descriptor sets are made once; buffers only when a larger batch arrives
    or the caller still holds every pooled buffer of its stream.
  - `close()` (the model closed) waits for the bridge's submissions and for the context's CUDA work, then frees slots,
    semaphores and pooled buffers, and destroys the Vulkan side of buffers that live outputs still view: their memory
    stays valid, held by CUDA's import, until the last array viewing it is collected, which frees it then (after a
    cuCtxSynchronize, since no later run orders that for it). So an output may outlive its model.
"""

from __future__ import annotations

import collections
import math
import os
import threading
import weakref
from typing import Any, Mapping

from coopnn.errors import BackendUnavailableError, DeviceLostError, InputError
from coopnn.interop import tensors
from coopnn.interop.cuda_driver import CudaDriver, SemaphoreArgs, cuda_driver
from coopnn.interop.vk_export import ExportedBuffer, ExportedTimeline, interop_unavailable_reason
from coopnn.runtime.vk.loader import check, load_vulkan
from coopnn.runtime.vk.memory import HostAccess

vk = load_vulkan()
ffi, lib = vk.ffi, vk.lib

SLOTS = 3
# Descriptor sets a slot keeps, one per distinct list of buffers bound (outputs vary while callers hold earlier ones).
SETS_PER_SLOT = 4
# Pooled output buffers kept idle at most; the oldest beyond this are freed.
IDLE_LIMIT = 8
# Inputs and pooled outputs are never made smaller than this (bytes), so small batches of varying size share buffers.
MIN_BUFFER_BYTES = 1 << 16
FENCE_TIMEOUT_NS = 600 * 10**9
VK_TIMEOUT = 2
QUEUE_FAMILY_EXTERNAL = vk.VK_QUEUE_FAMILY_EXTERNAL
# Queue submissions of contexts that predate `VulkanContext.queue_lock` are serialised with this one.
_FALLBACK_QUEUE_LOCK = threading.Lock()


def _capacity(nbytes: int, limit: int) -> int:
    """`nbytes` rounded up to a power of two (at least MIN_BUFFER_BYTES), but to no more than `limit`."""
    rounded = 1 << (max(nbytes, MIN_BUFFER_BYTES) - 1).bit_length()
    return max(nbytes, min(limit, rounded))


class SharedBuffer:
    """An `ExportedBuffer` mapped into CUDA: `pointer` addresses the bytes Vulkan binds through `handle`. It binds like
    `coopnn.runtime.vk.memory.Buffer`. Made, and its CUDA side freed, with the CUDA context current."""

    def __init__(self, context, driver: CudaDriver, size: int):
        self.vulkan = ExportedBuffer(context, size)
        self._driver = driver
        try:
            fd = self.vulkan.export_fd()
            try:
                self.memory = driver.import_memory(fd, self.vulkan.allocation_size, dedicated=True)
            except BaseException:
                os.close(fd)  # CUDA owns the fd only once the import succeeded
                raise
            try:
                self.pointer = driver.map_buffer(self.memory, 0, size)
            except BaseException:
                driver.destroy_memory(self.memory)
                raise
        except BaseException:
            self.vulkan.destroy()
            raise
        self._cuda_alive = True

    @property
    def handle(self):
        return self.vulkan.handle

    @property
    def size(self) -> int:
        return self.vulkan.size

    @property
    def serial(self) -> int:
        return self.vulkan.serial

    @property
    def alive(self) -> bool:
        return self.vulkan.alive

    def release_cuda(self) -> None:
        """Unmap and drop CUDA's reference to the memory; once both sides are released the memory is freed."""
        if self._cuda_alive:
            self._cuda_alive = False
            self._driver.free(self.pointer)
            self._driver.destroy_memory(self.memory)

    def release_vulkan(self) -> None:
        self.vulkan.destroy()


class SharedTimeline:
    """An `ExportedTimeline` imported into CUDA; `value` is the last value a signal was asked for."""

    def __init__(self, context, driver: CudaDriver):
        self.vulkan = ExportedTimeline(context)
        self._driver = driver
        try:
            fd = self.vulkan.export_fd()
            try:
                self.cuda = driver.import_timeline(fd)
            except BaseException:
                os.close(fd)
                raise
        except BaseException:
            self.vulkan.destroy()
            raise
        self.args = SemaphoreArgs(self.cuda)
        self.value = 0
        self._cuda_alive = True

    @property
    def handle(self):
        return self.vulkan.handle

    def release_cuda(self) -> None:
        if self._cuda_alive:
            self._cuda_alive = False
            self._driver.destroy_semaphore(self.cuda)

    def release_vulkan(self) -> None:
        self.vulkan.destroy()


class CudaOutput:
    """One output in pooled memory, exposing `__cuda_array_interface__`; when collected, it gives the memory back to
    the pool (or frees it, when its bridge is closed). `stream` is what the interface reports: None while the bridge
    wraps it in the caller's framework (PyTorch and CuPy are then used on that stream already)."""

    def __init__(self, pointer: int, shape: tuple[int, ...], typestr: str, stream: int | None = None):
        self.pointer = pointer
        self.shape = shape
        self.typestr = typestr
        self.nbytes = math.prod(shape) * tensors.ACCEPTED_TYPESTRS[typestr]
        self.stream = stream

    @property
    def __cuda_array_interface__(self) -> dict:
        interface = {"shape": self.shape, "typestr": self.typestr, "data": (self.pointer, False), "strides": None,
                     "version": 3}
        if self.stream is not None:
            interface["stream"] = 1 if self.stream == tensors.CU_STREAM_LEGACY else self.stream
        return interface


class OutputPool:
    """Shared buffers for outputs: lent to `CudaOutput`s, given back when they are collected, reused per stream."""

    def __init__(self, context, driver: CudaDriver, cuda_context: int, bindable_limit: int):
        self._context = context
        self._driver = driver
        self._cuda_context = cuda_context
        self._bindable_limit = bindable_limit
        # Re-entrant: an output collected by a garbage collection that runs inside a locked section gives back here.
        self._lock = threading.RLock()
        self._idle: list[tuple[int, SharedBuffer]] = []  # (stream, buffer), oldest first
        self._returned: collections.deque[tuple[int, SharedBuffer]] = collections.deque()
        self._lent: set[SharedBuffer] = set()
        self.closed = False

    def lend(self, nbytes: int, stream: int, bindable: bool) -> SharedBuffer:
        """A buffer of at least `nbytes` for a run on `stream` (no larger than a binding may be when `bindable`)."""
        limit = self._bindable_limit if bindable else nbytes
        with self._lock:
            fitting = [(buffer.size, i) for i, (s, buffer) in enumerate(self._idle)
                       if s == stream and nbytes <= buffer.size and (not bindable or buffer.size <= limit)]
            if fitting:
                _, index = min(fitting)
                buffer = self._idle.pop(index)[1]
                self._lent.add(buffer)
                return buffer
        buffer = SharedBuffer(self._context, self._driver, _capacity(nbytes, limit))
        with self._lock:
            self._lent.add(buffer)
        return buffer

    def output(self, buffer: SharedBuffer, shape: tuple[int, ...], typestr: str, stream: int) -> CudaOutput:
        output = CudaOutput(buffer.pointer, shape, typestr)
        weakref.finalize(output, self.give_back, buffer, stream).atexit = False
        return output

    def give_back(self, buffer: SharedBuffer, stream: int) -> None:
        """Called when an output viewing `buffer` is collected, on whatever thread drops it."""
        with self._lock:
            if not self.closed:
                self._returned.append((stream, buffer))
                return
            self._lent.discard(buffer)
        with self._driver.current(self._cuda_context):
            self._driver.synchronize()
            buffer.release_cuda()

    def reclaim(self) -> None:
        """Make returned buffers idle again; free the oldest beyond IDLE_LIMIT once CUDA is done with them."""
        with self._lock:
            while self._returned:
                stream, buffer = self._returned.popleft()
                self._lent.discard(buffer)
                self._idle.append((stream, buffer))
            excess = max(0, len(self._idle) - IDLE_LIMIT)
            victims = [buffer for _, buffer in self._idle[:excess]]
            del self._idle[:excess]
        if victims:
            with self._driver.current(self._cuda_context):
                self._driver.synchronize()
                for buffer in victims:
                    buffer.release_cuda()
                    buffer.release_vulkan()

    def take_back(self, buffer: SharedBuffer, stream: int) -> None:
        """Return a buffer lent to a run that failed before an output was made of it."""
        with self._lock:
            self._lent.discard(buffer)
            self._idle.append((stream, buffer))

    def close(self) -> None:
        """Free idle buffers (CUDA must be done with them: the caller synchronised) and the Vulkan side of lent ones;
        lent buffers are freed on CUDA's side by their outputs from now on."""
        with self._lock:
            self.closed = True
            idle = [buffer for _, buffer in self._idle] + [buffer for _, buffer in self._returned]
            self._idle = []
            self._returned.clear()
            self._lent -= set(idle)
            lent = list(self._lent)
        for buffer in idle:
            buffer.release_cuda()
            buffer.release_vulkan()
        for buffer in lent:
            buffer.release_vulkan()

    def counts(self) -> dict[str, int]:
        with self._lock:
            returned = {buffer for _, buffer in self._returned}
            return {"idle": len(self._idle) + len(returned), "lent": len(self._lent - returned)}


class Slot:
    """One submission that can be in flight: its command pool and buffer, fence and timestamp pair, its input buffers
    and the `inputs_ready` timeline CUDA signals once those are filled."""

    def __init__(self, context, driver: CudaDriver, input_count: int, output_count: int, done: SharedTimeline):
        device = context.device.handle
        tracker = context.tracker
        self._context = context
        self._device = device
        tokens = []
        try:
            created_pool = ffi.new("VkCommandPool*")
            check(vk, lib.vkCreateCommandPool(device, ffi.new("VkCommandPoolCreateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                "flags": vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                "queueFamilyIndex": context.device.queue_family}), ffi.NULL, created_pool), "vkCreateCommandPool")
            pool = created_pool[0]
            tokens.append(tracker.add("VkCommandPool", lambda: lib.vkDestroyCommandPool(device, pool, ffi.NULL)))
            self.command_buffers = ffi.new("VkCommandBuffer[1]")
            check(vk, lib.vkAllocateCommandBuffers(device, ffi.new("VkCommandBufferAllocateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, "commandPool": pool,
                "level": vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, "commandBufferCount": 1}), self.command_buffers),
                "vkAllocateCommandBuffers")
            self.fences = ffi.new("VkFence[1]")
            check(vk, lib.vkCreateFence(device, ffi.new("VkFenceCreateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO}), ffi.NULL, self.fences), "vkCreateFence")
            fence = self.fences[0]
            tokens.append(tracker.add("VkFence", lambda: lib.vkDestroyFence(device, fence, ffi.NULL)))
            self.query_pool = None
            if context.info.timestamp_valid_bits:
                created_queries = ffi.new("VkQueryPool*")
                check(vk, lib.vkCreateQueryPool(device, ffi.new("VkQueryPoolCreateInfo*", {
                    "sType": vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, "queryType": vk.VK_QUERY_TYPE_TIMESTAMP,
                    "queryCount": 2}), ffi.NULL, created_queries), "vkCreateQueryPool")
                query_pool = created_queries[0]
                tokens.append(tracker.add("VkQueryPool",
                                          lambda: lib.vkDestroyQueryPool(device, query_pool, ffi.NULL)))
                self.query_pool = query_pool
            self.inputs_ready = SharedTimeline(context, driver)
        except BaseException:
            tracker.release_many(reversed(tokens))
            raise
        self._tokens = list(reversed(tokens))
        self.inputs: list[SharedBuffer | None] = [None] * input_count
        self._sets: collections.OrderedDict[tuple[int, ...], Any] = collections.OrderedDict()
        self.chunk_outputs: list[Any] = [None] * output_count  # plain device buffers, for batches of several chunks
        self.in_flight = False
        self._timestamps = ffi.new("uint64_t[2]")
        self._wait_values = ffi.new("uint64_t[1]")
        self._signal_values = ffi.new("uint64_t[1]")
        self._wait_semaphores = ffi.new("VkSemaphore[1]", [self.inputs_ready.handle])
        self._signal_semaphores = ffi.new("VkSemaphore[1]", [done.handle])
        self._wait_stages = ffi.new("VkPipelineStageFlags[1]", [vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT])
        self._timeline_info = ffi.new("VkTimelineSemaphoreSubmitInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, "waitSemaphoreValueCount": 1,
            "pWaitSemaphoreValues": self._wait_values, "signalSemaphoreValueCount": 1,
            "pSignalSemaphoreValues": self._signal_values})
        self._submit_info = ffi.new("VkSubmitInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "pNext": self._timeline_info, "waitSemaphoreCount": 1,
            "pWaitSemaphores": self._wait_semaphores, "pWaitDstStageMask": self._wait_stages,
            "commandBufferCount": 1, "pCommandBuffers": self.command_buffers, "signalSemaphoreCount": 1,
            "pSignalSemaphores": self._signal_semaphores})
        self._begin_info = ffi.new("VkCommandBufferBeginInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            "flags": vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT})

    def wait(self) -> None:
        """Until this slot's last submission has finished."""
        if not self.in_flight:
            return
        result = lib.vkWaitForFences(self._device, 1, self.fences, vk.VK_TRUE, FENCE_TIMEOUT_NS)
        if result == VK_TIMEOUT:
            raise DeviceLostError(f"a submission on {self._context.info.name} ran for more than "
                                  f"{FENCE_TIMEOUT_NS // 10**9} s; the GPU is hung")
        check(vk, result, "vkWaitForFences")
        self.in_flight = False

    def descriptor_set(self, kernel, buffers):
        """A descriptor set of this slot's own binding `buffers` (as the array vkCmdBindDescriptorSets takes). Only
        this slot's submissions use its sets and it has waited for the last one, so the oldest may be destroyed."""
        key = tuple(buffer.serial for buffer in buffers)
        found = self._sets.get(key)
        if found is None:
            if len(self._sets) >= SETS_PER_SLOT:
                self._sets.popitem(last=False)[1].destroy()
            found = self._sets[key] = kernel.dedicated_descriptor_set(buffers)
        else:
            self._sets.move_to_end(key)
        return found.handle

    def record(self, kernel, buffers, shared, push: bytes, groups: int, copies) -> None:
        """Record one dispatch of `kernel` over `buffers`; `shared` are the buffers CUDA also uses (taken from and
        handed back to the external queue family); `copies` are (source, destination, offset, size) copied after."""
        descriptor_set = self.descriptor_set(kernel, buffers)
        cmd = self.command_buffers[0]
        family = self._context.device.queue_family
        check(vk, lib.vkBeginCommandBuffer(cmd, self._begin_info), "vkBeginCommandBuffer")
        # earlier submissions' writes (weights converted in place, this bridge's previous runs) become visible
        previous = ffi.new("VkMemoryBarrier*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER, "srcAccessMask": vk.VK_ACCESS_MEMORY_WRITE_BIT,
            "dstAccessMask": vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT})
        acquire = _ownership_barriers(shared, QUEUE_FAMILY_EXTERNAL, family, 0,
                                      vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
        lib.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0,
                                 1, previous, len(shared), acquire, 0, ffi.NULL)
        if self.query_pool is not None:
            lib.vkCmdResetQueryPool(cmd, self.query_pool, 0, 2)
            lib.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, self.query_pool, 0)
        lib.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, kernel.pipeline)
        lib.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, kernel.layout, 0, 1, descriptor_set, 0,
                                    ffi.NULL)
        if push:
            lib.vkCmdPushConstants(cmd, kernel.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push),
                                   ffi.from_buffer(push))
        lib.vkCmdDispatch(cmd, groups, 1, 1)
        if self.query_pool is not None:
            lib.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, self.query_pool, 1)
        if copies:
            to_copies = ffi.new("VkMemoryBarrier*", {
                "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER, "srcAccessMask": vk.VK_ACCESS_SHADER_WRITE_BIT,
                "dstAccessMask": vk.VK_ACCESS_TRANSFER_READ_BIT})
            lib.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                                     0, 1, to_copies, 0, ffi.NULL, 0, ffi.NULL)
            for source, destination, offset, size in copies:
                lib.vkCmdCopyBuffer(cmd, source.handle, destination.handle, 1,
                                    ffi.new("VkBufferCopy*", (0, offset, size)))
        release = _ownership_barriers(shared, family, QUEUE_FAMILY_EXTERNAL,
                                      vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT, 0)
        lib.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0,
                                 0, ffi.NULL, len(shared), release, 0, ffi.NULL)
        check(vk, lib.vkEndCommandBuffer(cmd), "vkEndCommandBuffer")

    def submit(self, queue, queue_lock, wait_value: int, done: SharedTimeline) -> None:
        """Submit the recording: it waits for `inputs_ready` to reach `wait_value` and signals `done` to its next
        value, taken under the queue lock so that values follow submission order."""
        self._wait_values[0] = wait_value
        check(vk, lib.vkResetFences(self._device, 1, self.fences), "vkResetFences")
        with queue_lock:
            self._signal_values[0] = done.value + 1
            check(vk, lib.vkQueueSubmit(queue, 1, self._submit_info, self.fences[0]), "vkQueueSubmit")
            done.value += 1
        self.in_flight = True

    def elapsed_ms(self) -> float | None:
        """GPU time of the last dispatch (waits for it to finish); None without timestamps."""
        if self.query_pool is None:
            return None
        self.wait()
        check(vk, lib.vkGetQueryPoolResults(self._device, self.query_pool, 0, 2, 16, self._timestamps, 8,
                                            vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT),
              "vkGetQueryPoolResults")
        info = self._context.info
        ticks = (self._timestamps[1] - self._timestamps[0]) & ((1 << info.timestamp_valid_bits) - 1)
        return ticks * info.limits.timestamp_period_ns / 1e6

    def release_cuda(self) -> None:
        for buffer in self.inputs:
            if buffer is not None:
                buffer.release_cuda()
        self.inputs_ready.release_cuda()

    def release_vulkan(self) -> None:
        for descriptor_set in self._sets.values():
            descriptor_set.destroy()
        for buffer in self.inputs:
            if buffer is not None:
                buffer.release_vulkan()
        for buffer in self.chunk_outputs:
            if buffer is not None:
                buffer.destroy()
        self.inputs_ready.release_vulkan()
        self._context.tracker.release_many(self._tokens)


def _ownership_barriers(buffers, source_family: int, destination_family: int, source_access: int,
                        destination_access: int):
    """Queue-family ownership transfers of whole buffers, between this queue's family and VK_QUEUE_FAMILY_EXTERNAL."""
    return ffi.new("VkBufferMemoryBarrier[]", [{
        "sType": vk.VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER, "srcAccessMask": source_access,
        "dstAccessMask": destination_access, "srcQueueFamilyIndex": source_family,
        "dstQueueFamilyIndex": destination_family, "buffer": buffer.handle, "offset": 0, "size": buffer.size}
        for buffer in buffers])


class _RunTiming:
    """The GPU time of one run's dispatches: read from a slot's timestamps before the run reuses it, and from the
    slots still holding theirs when asked."""

    def __init__(self):
        self._pending: list[Slot] = []
        self._measured: list[float | None] = []

    def reusing(self, slot: Slot) -> None:
        slot.wait()
        if slot in self._pending:
            self._pending.remove(slot)
            self._measured.append(slot.elapsed_ms())

    def submitted(self, slot: Slot) -> None:
        self._pending.append(slot)

    def total_ms(self) -> float | None:
        times = self._measured + [slot.elapsed_ms() for slot in self._pending]
        return None if not times or None in times else sum(times)


def _typestr(binding) -> str:
    return tensors.KERNEL_TYPESTRS[binding.dtype]


class _Resources:
    """Everything a bridge owns, freed by `close` (directly, or when the bridge is collected)."""

    def __init__(self, context, driver: CudaDriver, cuda_context: int, bindable_limit: int):
        self.context = context
        self.driver = driver
        self.cuda_context = cuda_context
        self.slots: list[Slot] = []
        self.done: SharedTimeline | None = None
        self.pool = OutputPool(context, driver, cuda_context, bindable_limit)

    def close(self) -> None:
        try:
            if not self.context.closed:
                for slot in self.slots:
                    slot.wait()
            with self.driver.current(self.cuda_context):
                self.driver.synchronize()  # no queued CUDA work may still use what is freed below
                for slot in self.slots:
                    slot.release_cuda()
                if self.done is not None:
                    self.done.release_cuda()
                self.pool.close()
        finally:
            for slot in self.slots:
                slot.release_vulkan()
            if self.done is not None:
                self.done.release_vulkan()


class CudaBridge:
    """Runs `executable` (a `KernelExecutable`) on CUDA arrays: `run({name: array})` returns {name: array} in the
    caller's framework, ordered on the caller's stream; see the module docstring for the mechanism and lifetimes."""

    def __init__(self, executable):
        context = executable.context
        reason = interop_unavailable_reason(context)
        if reason is not None:
            raise BackendUnavailableError(reason)
        self._executable = executable
        self._context = context
        self._driver = cuda_driver()
        ordinal = self._driver.ordinal_of_uuid(context.info.device_uuid)
        if ordinal is None:
            raise BackendUnavailableError(f"CUDA does not see {context.info.name} (Vulkan device UUID "
                                          f"{context.info.device_uuid}); check CUDA_VISIBLE_DEVICES")
        self.device = ordinal
        graph = executable.graph
        self._input_features = {v.name: tuple(v.features) for v in graph.inputs}
        self._outputs = {v.name: (tuple(v.features), v.dtype == "bool") for v in graph.outputs}
        self._input_bindings = tuple(executable.inputs)
        self._output_bindings = tuple(executable.outputs)
        limits = context.info.limits
        widest = max(b.features * b.itemsize for b in self._input_bindings + self._output_bindings)
        self.chunk_limit = max(1, min(limits.max_storage_buffer_range // widest,
                                      limits.max_compute_work_group_count[0] * executable.kernel.workgroup_size[0]))
        self._queue_lock = getattr(context, "queue_lock", _FALLBACK_QUEUE_LOCK)
        self._lock = threading.Lock()
        cuda_context = self._driver.primary_context(ordinal)
        self._resources = _Resources(context, self._driver, cuda_context, limits.max_storage_buffer_range)
        self._closer = weakref.finalize(self, self._resources.close)
        self._closer.atexit = False  # at exit the process's end frees CUDA's side, the context's close the rest
        try:
            with self._driver.current(cuda_context):
                self._resources.done = SharedTimeline(context, self._driver)
                for _ in range(SLOTS):
                    self._resources.slots.append(Slot(context, self._driver, len(self._input_bindings),
                                                      len(self._output_bindings), self._resources.done))
        except BaseException:
            self.close()
            raise
        self._next_slot = 0
        self._timing = _RunTiming()

    @property
    def closed(self) -> bool:
        return not self._closer.alive

    def run(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        """Run the kernel on CUDA arrays keyed by input name; outputs keyed by output name, in the framework of the
        first input, ready on its stream."""
        with self._lock:
            if self.closed:
                raise InputError("this model is closed")
            # new weights and the executable's close wait for this host part; the GPU part is ordered by the queue
            with self._executable.gate.shared():
                return self._run(feeds)

    def _read_inputs(self, feeds: Mapping[str, Any]) -> list[tensors.CudaInput]:
        missing = [b.name for b in self._input_bindings if b.name not in feeds]
        if missing:
            raise InputError(f"missing inputs {missing}; expected {[b.name for b in self._input_bindings]}")
        inputs = [tensors.as_cuda_input(b.name, feeds[b.name], self._input_features[b.name], b.dtype)
                  for b in self._input_bindings]
        first = self._input_bindings[0].name
        for binding, given in zip(self._input_bindings, inputs):
            if given.rows != inputs[0].rows:
                raise InputError(f"input {binding.name!r} has batch {given.rows}, input {first!r} has "
                                 f"{inputs[0].rows}")
            if given.stream != inputs[0].stream:
                raise InputError(f"input {binding.name!r} is on CUDA stream {given.stream:#x}, input {first!r} on "
                                 f"{inputs[0].stream:#x}; put them on one stream")
            device = given.device
            if device is None and given.rows:
                device = self._driver.pointer_device(given.pointer)
            if device is not None and device != self.device:
                raise InputError(f"input {binding.name!r} is on cuda:{device}; the model runs on "
                                 f"{self._context.info.name}, which is cuda:{self.device}")
        return inputs

    def _run(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        resources = self._resources
        with self._driver.current(resources.cuda_context):
            inputs = self._read_inputs(feeds)
            batch, stream = inputs[0].rows, inputs[0].stream
            framework = tensors.framework_of(feeds[self._input_bindings[0].name])
            if batch == 0:
                return {b.name: tensors.wrap_output(CudaOutput(0, (0,) + self._outputs[b.name][0], _typestr(b)),
                                                    framework, self.device, stream, self._outputs[b.name][1])
                        for b in self._output_bindings}
            resources.pool.reclaim()
            single = batch <= self.chunk_limit
            lent = []
            try:
                for binding in self._output_bindings:
                    lent.append(resources.pool.lend(batch * binding.features * binding.itemsize, stream, single))
                self._timing = _RunTiming()
                for start in range(0, batch, self.chunk_limit):
                    self._dispatch(inputs, lent, start, min(self.chunk_limit, batch - start), single, stream)
            except BaseException:
                for buffer in lent:
                    resources.pool.take_back(buffer, stream)
                raise
            # later work on the caller's stream waits for the last submission, which follows all earlier ones
            self._driver.wait(resources.done.args, resources.done.value, stream)
            # every buffer is owned by an output object before any is wrapped, so a failure gives them all back
            made = [resources.pool.output(buffer, (batch,) + self._outputs[b.name][0], _typestr(b), stream)
                    for b, buffer in zip(self._output_bindings, lent)]
            return {b.name: tensors.wrap_output(output, framework, self.device, stream, self._outputs[b.name][1])
                    for b, output in zip(self._output_bindings, made)}

    def _dispatch(self, inputs: list[tensors.CudaInput], outputs: list[SharedBuffer], start: int, count: int,
                  single: bool, stream: int) -> None:
        """Copy rows [start, start + count) in on `stream` and submit their dispatch on a free slot."""
        executable, context = self._executable, self._context
        slot = self._resources.slots[self._next_slot]
        self._next_slot = (self._next_slot + 1) % SLOTS
        self._timing.reusing(slot)
        for index, given in enumerate(inputs):
            nbytes = count * given.row_bytes
            buffer = slot.inputs[index]
            if buffer is None or buffer.size < nbytes:
                slot.inputs[index] = None
                if buffer is not None:  # the slot's last submission, and the copies it waited for, are done
                    buffer.release_cuda()
                    buffer.release_vulkan()
                buffer = slot.inputs[index] = SharedBuffer(
                    context, self._driver, _capacity(nbytes, context.info.limits.max_storage_buffer_range))
            source = given.pointer + start * given.pitch
            if given.pitch == given.row_bytes:
                self._driver.copy(buffer.pointer, source, nbytes, stream)
            else:
                self._driver.copy_rows(buffer.pointer, source, given.row_bytes, count, given.pitch, stream)
        slot.inputs_ready.value += 1
        self._driver.signal(slot.inputs_ready.args, slot.inputs_ready.value, stream)
        copies = []
        if single:
            bound_outputs = outputs
        else:
            bound_outputs = [self._chunk_output(slot, index, binding, count)
                             for index, binding in enumerate(self._output_bindings)]
            copies = [(chunk, whole, start * b.features * b.itemsize, count * b.features * b.itemsize)
                      for chunk, whole, b in zip(bound_outputs, outputs, self._output_bindings)]
        shared = [b for b in slot.inputs if b is not None] + list(outputs)
        slot.record(executable.kernel, (executable.weights, *slot.inputs, *bound_outputs), shared,
                    executable.binary.pack_push(count=count), executable.kernel.group_count_for(count), copies)
        slot.submit(context.device.queue, self._queue_lock, slot.inputs_ready.value, self._resources.done)
        self._timing.submitted(slot)

    def _chunk_output(self, slot: Slot, index: int, binding, count: int):
        """The slot's own device buffer the kernel writes output `index` of a chunk into."""
        nbytes = count * binding.features * binding.itemsize
        buffer = slot.chunk_outputs[index]
        if buffer is None or buffer.size < nbytes:
            slot.chunk_outputs[index] = None
            if buffer is not None:
                buffer.destroy()
            buffer = slot.chunk_outputs[index] = self._context.create_buffer(
                _capacity(nbytes, self._context.info.limits.max_storage_buffer_range), HostAccess.NONE)
        return buffer

    @property
    def last_gpu_ms(self) -> float | None:
        """GPU time of the last run's dispatches in ms (waits for them to finish); None without timestamps."""
        with self._lock:
            return self._timing.total_ms()

    def pool_counts(self) -> dict[str, int]:
        """Pooled output buffers: idle, and lent to outputs still alive."""
        return self._resources.pool.counts()

    def close(self) -> None:
        """Free what the bridge owns once its work is done; outputs still alive keep their memory (module docstring).
        Harmless when closed already."""
        with self._lock:
            self._closer()
