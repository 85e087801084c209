"""The host path of a compiled model: the user's arrays in, through mapped Vulkan memory, and the results out.

A run splits its batch into chunks and pipelines them over `IOSlot`s: while the copy threads write chunk k+1 into the
next slot, the calling thread waits for chunk k on the GPU and copies its results out (unless the GPU wrote them into
the result array itself). Each slot owns its input and output buffers, a descriptor set and a `Lane` (command
buffer, fence, timestamps), so calls from several threads overlap on the GPU with no shared mutable state but the
pool's free list; the pool's size bounds the memory in use. Nothing is allocated per call once the slots have grown
to the batch sizes in use.

Where the data goes (`coopnn.runtime.vk.memory.choose_placement`): inputs are written by the host straight into
device-local memory it can map (all of an H100's memory, through resizable BAR), or into a staging buffer copied by
the GPU in the same submission; outputs are read from host-cached memory, written there by the GPU's copy after the
dispatch (or directly by the shader on devices whose device memory is host-cached, such as CPU devices). The shader
does not write host-cached memory across the bus itself, as that made its kernel many times longer from mid-sized
batches up (`bench/results/nvidia-h100-80gb-hbm3-2026-11-24-host-variants.md`). Inputs and
outputs are float32 in memory; the user's float16, float64, strided or Fortran-ordered arrays are converted in the
copy (`coopnn.runtime.copies.copy_rows`), never twice.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from coopnn.runtime.copies import copy_rows, start_copy
from coopnn.runtime.vk.lane import Lane, barrier, copy_buffer
from coopnn.runtime.vk.loader import load_vulkan
from coopnn.runtime.vk.memory import HostAccess, Placement

if TYPE_CHECKING:
    from coopnn.runtime.vk.context import VulkanContext
    from coopnn.runtime.vk.host_import import ImportedHostBuffer
    from coopnn.runtime.vk.memory import Buffer
    from coopnn.runtime.vk.pipeline import ComputeKernel
    from coopnn.shaders.targets.base import Binding

vk = load_vulkan()
lib, ffi = vk.lib, vk.ffi

FLOAT32 = np.dtype(np.float32)
# Slots per model: two pipeline one call's chunks; more let calls from other threads overlap on the GPU too.
SLOTS = 4
# Input and output bytes per chunk, at most: every chunk costs a fixed copy ramp and submission, so fewer, larger
# chunks win; this was the fastest of the sizes tried on the largest benchmark batches.
CHUNK_IO_BYTES = 128 << 20
# Mid-sized batches are cut into at least this many chunks of at least this many bytes: with a single chunk, nothing
# overlaps its copy in and its copy out.
MIN_CHUNKS = 4
MIN_CHUNK_IO_BYTES = 2 << 20


@dataclass
class RunTiming:
    """Where the wall-clock time of the last run went, in milliseconds (host side) and the GPU's own time."""

    copy_in_ms: float = 0.0  # user arrays -> mapped memory (conversion included), beyond what overlapped copy out
    submit_ms: float = 0.0  # recording (when the chunk size changed) and vkQueueSubmit
    wait_ms: float = 0.0  # the host waiting for the GPU
    copy_out_ms: float = 0.0  # mapped memory -> output arrays
    gpu_ms: float | None = 0.0  # timestamps around the dispatches, summed over chunks
    chunks: int = 0
    total_ms: float = 0.0


class IOSlot:
    """One chunk's input and output buffers, the descriptor set binding them, and the lane that runs them."""

    def __init__(self, context: VulkanContext, kernel: ComputeKernel, weights: Buffer,
                 inputs: Sequence[Binding], outputs: Sequence[Binding], push: Callable[[int], bytes]):
        self.context, self.kernel, self.weight_buffer = context, kernel, weights
        self.inputs, self.outputs = tuple(inputs), tuple(outputs)
        self._push = push
        self.lane = Lane(context.device, context.tracker, context.queue_lock)
        self.capacity = 0
        self.buffers: dict[int, Buffer] = {}
        self._descriptor_set = None

    def ensure(self, samples: int, max_samples: int) -> None:
        """Grow the buffers to hold `samples` (to the next power of two, at most `max_samples`)."""
        if samples <= self.capacity:
            return
        capacity = min(max_samples, 1 << max(samples - 1, 1).bit_length())
        self._drop_buffers()
        for b in self.inputs + self.outputs:
            access = HostAccess.WRITE if b.role == "input" else HostAccess.READ
            self.buffers[b.index] = self.context.create_buffer(capacity * b.features * FLOAT32.itemsize, access)
        ordered = (self.weight_buffer,) + tuple(self.buffers[b.index] for b in self.inputs + self.outputs)
        self._descriptor_set = self.kernel.dedicated_descriptor_set(ordered)
        self.capacity = capacity

    def view(self, binding: Binding, samples: int) -> np.ndarray:
        """The mapped rows of the first `samples` samples of an input or output binding (samples x features)."""
        return self.buffers[binding.index].mapped(FLOAT32, samples * binding.features).reshape(samples,
                                                                                               binding.features)

    def launch(self, samples: int, targets: Mapping[int, tuple[ImportedHostBuffer, int]] | None = None) -> None:
        """Submit the chunk of `samples` whose inputs were written; `targets` sends outputs (by binding index) to a
        (imported host buffer, byte offset) instead of the slot's own memory. Each combination is recorded once
        and resubmitted (`Lane.use`)."""
        targets = targets or {}
        # serials, never reused, name the target buffers (a destroyed buffer's handle may come back for another)
        key = (self.capacity, samples, tuple(sorted((i, t.serial, o) for i, (t, o) in targets.items())))
        self.lane.use(key, lambda cmd: self._record(cmd, samples, targets))
        self.lane.submit()

    def finish(self) -> float | None:
        """Wait for the chunk; its GPU time in ms."""
        self.lane.wait()
        return self.lane.elapsed_ms()

    def _record(self, cmd, samples: int, targets: Mapping[int, tuple[ImportedHostBuffer, int]]) -> None:
        # after the weight updates and other work earlier on the queue
        barrier(cmd, "after_previous_work")
        self.lane.reset_timestamps(cmd)
        staged_inputs = [b for b in self.inputs if self.buffers[b.index].placement is Placement.STAGED]
        for b in staged_inputs:
            buffer = self.buffers[b.index]
            copy_buffer(cmd, buffer.staging_handle, buffer.handle, 0, 0, samples * b.features * FLOAT32.itemsize)
        if staged_inputs:
            barrier(cmd, "uploads_to_shaders")
        self.lane.timestamp(cmd, 0)
        lib.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.kernel.pipeline)
        lib.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.kernel.layout, 0, 1,
                                    self._descriptor_set.handle, 0, ffi.NULL)
        push = self._push(samples)
        lib.vkCmdPushConstants(cmd, self.kernel.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push),
                               ffi.from_buffer(push))
        lib.vkCmdDispatch(cmd, self.kernel.group_count_for(samples), 1, 1)
        self.lane.timestamp(cmd, 1)
        downloads = [(b, targets.get(b.index)) for b in self.outputs
                     if b.index in targets or self.buffers[b.index].placement is Placement.STAGED]
        if downloads:
            barrier(cmd, "shaders_to_downloads")
        for b, target in downloads:
            buffer = self.buffers[b.index]
            destination, offset = (target[0].handle, target[1]) if target else (buffer.staging_handle, 0)
            copy_buffer(cmd, buffer.handle, destination, 0, offset, samples * b.features * FLOAT32.itemsize)
        barrier(cmd, "device_to_host")

    def _drop_buffers(self) -> None:
        if self._descriptor_set is not None:
            self._descriptor_set.destroy()
            self._descriptor_set = None
        for buffer in self.buffers.values():
            buffer.destroy()
        self.buffers = {}
        self.capacity = 0

    def destroy(self) -> None:
        self._drop_buffers()
        self.lane.destroy()


class SlotPool:
    """Up to `size` slots made on demand; `acquire` waits for a free one when all are in use."""

    def __init__(self, make: Callable[[], IOSlot], size: int = SLOTS):
        self._make = make
        self._size = size
        self._free: list[IOSlot] = []
        self._all: list[IOSlot] = []
        self._condition = threading.Condition()

    def acquire(self, block: bool = True) -> IOSlot | None:
        with self._condition:
            while True:
                if self._free:
                    return self._free.pop()
                if len(self._all) < self._size:
                    self._all.append(None)  # reserved while the slot is made outside the lock
                    break
                if not block:
                    return None
                self._condition.wait()
        try:
            slot = self._make()
        except BaseException:
            with self._condition:
                self._all.remove(None)
                self._condition.notify()
            raise
        with self._condition:
            self._all[self._all.index(None)] = slot
        return slot

    def release(self, slot: IOSlot) -> None:
        with self._condition:
            self._free.append(slot)
            self._condition.notify()

    def destroy(self) -> None:
        """Destroy every slot (the caller makes sure none is in use)."""
        with self._condition:
            slots, self._all, self._free = [s for s in self._all if s is not None], [], []
        for slot in slots:
            slot.destroy()

    def __len__(self) -> int:
        return len(self._all)


def run_chunks(pool: SlotPool, inputs: Sequence[Binding], outputs: Sequence[Binding],
               feeds: Mapping[str, np.ndarray], results: Mapping[str, np.ndarray], chunk: int,
               max_samples: int, imported: Mapping[int, tuple[ImportedHostBuffer, int]] | None = None) -> RunTiming:
    """Run the whole batch of `feeds` (arrays keyed by input name, rows = samples) chunk by chunk, writing every
    output row into `results` (float32 arrays keyed by output name). `imported` maps output bindings whose result
    array is imported host memory to (its buffer, byte offset of its first row): the GPU copies those rows there.

    Chunk k's inputs are copied in on the copy threads while the calling thread waits for chunk k-1 and copies its
    results out; then chunk k is submitted. A call holds at most two slots: the one being filled and the one on the
    GPU.
    """
    timing = RunTiming()
    started = time.perf_counter()
    batch = next(iter(feeds.values())).shape[0]
    pending: deque[tuple[IOSlot, int, int]] = deque()
    imported = imported or {}
    copied_outputs = [b for b in outputs if b.index not in imported]
    row_bytes = {b.index: b.features * FLOAT32.itemsize for b in outputs}

    def retire(slot: IOSlot, start: int, n: int) -> None:
        """Wait for a launched chunk and copy its results out (the slot stays the caller's)."""
        t0 = time.perf_counter()
        gpu_ms = slot.finish()
        t1 = time.perf_counter()
        for b in copied_outputs:
            copy_rows(results[b.name][start:start + n], slot.view(b, n))
        timing.wait_ms += (t1 - t0) * 1e3
        timing.copy_out_ms += (time.perf_counter() - t1) * 1e3
        timing.gpu_ms = None if gpu_ms is None or timing.gpu_ms is None else timing.gpu_ms + gpu_ms

    def retire_and_release(slot: IOSlot, start: int, n: int) -> None:
        try:
            retire(slot, start, n)
        finally:
            _release_when_done(pool, slot)

    try:
        for start in range(0, batch, chunk):
            n = min(chunk, batch - start)
            slot = pool.acquire(block=not pending)
            if slot is None:
                # every slot is busy (other threads): finish our oldest chunk and reuse its slot
                slot, done_start, done_n = pending.popleft()
                try:
                    retire(slot, done_start, done_n)
                except BaseException:
                    _release_when_done(pool, slot)
                    raise
            try:
                t0 = time.perf_counter()
                slot.ensure(n, max_samples)
                copying = [start_copy(slot.view(b, n), feeds[b.name][start:start + n].reshape(n, b.features))
                           for b in inputs]
                timing.copy_in_ms += (time.perf_counter() - t0) * 1e3
                try:
                    while pending:  # the previous chunk, on the GPU while this one is copied in
                        retire_and_release(*pending.popleft())
                finally:
                    t0 = time.perf_counter()
                    for copy in copying:
                        copy.wait()
                    timing.copy_in_ms += (time.perf_counter() - t0) * 1e3
                t0 = time.perf_counter()
                slot.launch(n, {index: (buffer, offset + start * row_bytes[index])
                                for index, (buffer, offset) in imported.items()})
                timing.submit_ms += (time.perf_counter() - t0) * 1e3
            except BaseException:
                pool.release(slot)
                raise
            pending.append((slot, start, n))
            timing.chunks += 1
        while pending:
            retire_and_release(*pending.popleft())
    finally:
        # an error (or an interrupt) left chunks in flight: their slots go back only once the GPU is done with them
        while pending:
            _release_when_done(pool, pending.popleft()[0])
    timing.total_ms = (time.perf_counter() - started) * 1e3
    return timing


def _release_when_done(pool: SlotPool, slot: IOSlot) -> None:
    """Give `slot` back to `pool` once the GPU is done with it (also when waiting is cut short)."""
    try:
        slot.lane.wait()
    finally:
        pool.release(slot)


def chunk_samples(inputs: Sequence[Binding], outputs: Sequence[Binding], max_samples: int, workgroup: int) -> int:
    """The largest chunk: CHUNK_IO_BYTES of input and output rows, whole workgroups, at most `max_samples`."""
    samples = max(workgroup, CHUNK_IO_BYTES // row_bytes(inputs, outputs) // workgroup * workgroup)
    return min(samples, max_samples)


def split_batch(batch: int, largest: int, inputs: Sequence[Binding], outputs: Sequence[Binding],
                workgroup: int) -> int:
    """Samples per chunk for a batch: at most `largest`, and the batch cut into MIN_CHUNKS where each chunk still
    holds MIN_CHUNK_IO_BYTES (fewer, down to one, below that), so that copies overlap even in mid-sized batches."""
    smallest = max(workgroup, MIN_CHUNK_IO_BYTES // row_bytes(inputs, outputs) // workgroup * workgroup)
    even = -(-batch // MIN_CHUNKS)
    return min(largest, max(smallest, -(-even // workgroup) * workgroup))


def row_bytes(inputs: Sequence[Binding], outputs: Sequence[Binding]) -> int:
    """Bytes of one sample's input and output rows (float32)."""
    return max(1, sum(b.features for b in tuple(inputs) + tuple(outputs)) * FLOAT32.itemsize)
