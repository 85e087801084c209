"""`Dispatcher`: one `Lane` (command buffer, fence, timestamp queries) reused by every submission made through it.

`run()` records a whole step into one submission: pending uploads of STAGED buffers, the dispatches
(`record_sequence`: a barrier between consecutive ones, except before one that runs `alongside` the one before it),
downloads of readable STAGED buffers, and a barrier making device writes visible to the host; it waits on the fence
and returns the GPU time between the two timestamps around the dispatches. Nothing is allocated on the Vulkan side per
call. `submit()` runs any other recording (one-off transfers) the same way. Calls from several threads take turns; the
host path of a model runs its own lanes beside this one (`runtime/host_path`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, NamedTuple, Protocol, Sequence

import numpy as np

from coopnn.runtime.vk.lane import Lane, barrier, copy_buffer
from coopnn.runtime.vk.loader import load_vulkan
from coopnn.runtime.vk.memory import Buffer, HostAccess, Placement

if TYPE_CHECKING:
    from coopnn.runtime.vk.device import Device
    from coopnn.runtime.vk.device_info import DeviceInfo
    from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()
ffi, lib = vk.ffi, vk.lib


class Kernel(Protocol):
    """What a dispatch binds: a `pipeline.ComputeKernel`, named here rather than imported because kernels are built
    on this module (`ComputeKernel.run` dispatches through it)."""

    name: str
    pipeline: object
    layout: object
    push_constant_size: int
    descriptor_set_capacity: int

    def descriptor_set(self, buffers: Sequence[Buffer]):
        """The descriptor set binding `buffers` to 0..N-1, as a one-element VkDescriptorSet array."""


@dataclass(frozen=True, eq=False)
class Dispatch:
    """One vkCmdDispatch of `kernel` over `buffers` (bindings 0..N-1) with `push_constants` bytes. With `alongside`
    no barrier is recorded before it, so it may run while the dispatch before it does: neither may write memory the
    other touches (the barrier after it orders both against what follows)."""

    kernel: Kernel
    buffers: tuple[Buffer, ...]
    push_constants: bytes | np.ndarray = b""
    group_count: int | tuple[int, int, int] = 1
    alongside: bool = False


@dataclass(frozen=True, eq=False)
class Recorded:
    """Commands other than dispatches recorded in a run's sequence (buffer fills, copies, matrix conversions) by
    `record(command_buffer)`; full memory barriers order them against the dispatches around them."""

    record: Callable[[object], None]


class Dispatcher:
    """Records and submits work on the context's compute queue, one submission at a time (a lock makes callers on
    other threads wait their turn)."""

    def __init__(self, logical_device: Device, tracker: ObjectTracker, queue_lock: threading.Lock):
        self.info = logical_device.info
        self._lane = Lane(logical_device, tracker, queue_lock)
        self._lock = threading.Lock()

    def submit(self, record: Callable[[object], None]) -> None:
        """Record with `record(command_buffer)`, submit, and wait until the GPU is done."""
        with self._lock:
            self._record_and_run(record)

    def _record_and_run(self, record: Callable[[object], None]) -> None:
        cmd = self._lane.begin()
        record(cmd)
        self._lane.end()
        self._lane.run()

    def run(self, steps: Sequence[Dispatch | Recorded],
            downloads: Mapping[Buffer, tuple[int, int]] | None = None) -> float | None:
        """Upload, dispatch and download in one submission; the dispatches' GPU time in ms (None if the queue has no
        timestamps). `steps` are dispatches, and recorded commands run between them in order.

        `downloads` maps STAGED buffers to the (offset, size) byte range to bring back; by default every bound STAGED
        buffer the host reads comes back whole.
        """
        with self._lock:
            return self._run(steps, downloads)

    def _run(self, steps: Sequence[Dispatch | Recorded], downloads: Mapping[Buffer, tuple[int, int]] | None):
        dispatches = [d for d in steps if isinstance(d, Dispatch)]
        bound = list(dict.fromkeys(b for d in dispatches for b in d.buffers))
        _check_descriptor_capacity(dispatches)
        if downloads is None:
            downloads = {b: (0, b.size) for b in bound
                         if b.placement is Placement.STAGED and HostAccess.READ in b.host_access}
        _check_downloads(downloads)
        commands = commands_for(self.info, steps, lambda d: d.kernel.descriptor_set(d.buffers))
        # Taken only once every dispatch has been checked, so a refused run leaves pending uploads pending.
        uploads = [(b, r) for b in bound if b.placement is Placement.STAGED for r in [b.take_pending_upload()] if r]

        def record(cmd) -> None:
            record_commands(cmd, self._lane, lambda buffer: record_sequence(buffer, commands), uploads,
                            downloads.items())

        self._record_and_run(record)
        return self._lane.elapsed_ms()

    def destroy(self) -> None:
        self._lane.destroy()


def record_commands(cmd, lane: Lane, body: Callable[[object], None],
                    uploads: Sequence[tuple[Buffer, tuple[int, int]]],
                    downloads: Sequence[tuple[Buffer, tuple[int, int]]]) -> None:
    """Record a submission: staging copies of the (start, stop) byte ranges `uploads`, what `body(cmd)` records (the
    dispatches: `record_sequence`) with timestamps around it, then staging copies of the (offset, size) ranges
    `downloads` and a barrier making device writes visible to the host."""
    barrier(cmd, "after_previous_work")
    lane.reset_timestamps(cmd)
    for buffer, (start, stop) in uploads:
        copy_buffer(cmd, buffer.staging_handle, buffer.handle, start, start, stop - start)
    if uploads:
        barrier(cmd, "uploads_to_shaders")
    lane.timestamp(cmd, 0)
    body(cmd)
    lane.timestamp(cmd, 1)
    if downloads:
        barrier(cmd, "shaders_to_downloads")
    for buffer, (offset, size) in downloads:
        copy_buffer(cmd, buffer.handle, buffer.staging_handle, offset, offset, size)
    barrier(cmd, "device_to_host")


def barrier_between(previous, command) -> str | None:
    """The barrier recorded between two consecutive commands (each a `Recorded` or a `DispatchCommand`): a full one
    next to recorded commands, none before a dispatch `alongside` the one before it."""
    recorded = isinstance(command, Recorded)
    if not recorded and command.alongside:
        return None
    return "after_previous_work" if recorded or isinstance(previous, Recorded) else "between_dispatches"


def record_sequence(cmd, commands: Sequence) -> None:
    """Record `commands` (a `Recorded`, or a `DispatchCommand`) with `barrier_between` consecutive ones."""
    for index, command in enumerate(commands):
        if index and (name := barrier_between(commands[index - 1], command)) is not None:
            barrier(cmd, name)
        if isinstance(command, Recorded):
            command.record(cmd)
            continue
        kernel, push = command.kernel, command.push
        lib.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, kernel.pipeline)
        lib.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, kernel.layout, 0, 1,
                                    command.descriptor_sets, 0, ffi.NULL)
        if push is not None:
            lib.vkCmdPushConstants(cmd, kernel.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push), push)
        lib.vkCmdDispatch(cmd, *command.groups)


def push_bytes(dispatch: Dispatch):
    """The dispatch's push constants as an FFI buffer of exactly the kernel's push-constant size (None if zero)."""
    data = dispatch.push_constants
    raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    size = dispatch.kernel.push_constant_size
    if len(raw) != size:
        raise ValueError(f"{dispatch.kernel.name} takes {size} bytes of push constants, got {len(raw)}")
    return ffi.from_buffer(raw) if size else None


class DispatchCommand(NamedTuple):
    """What `record_sequence` records for a `Dispatch`: push constant bytes and group count checked."""

    kernel: Kernel
    descriptor_sets: object
    push: object
    groups: tuple[int, int, int]
    alongside: bool


def commands_for(info: DeviceInfo, steps: Sequence[Dispatch | Recorded], descriptor_set) -> list:
    """`steps` as `record_sequence` takes them: recorded commands as they are, dispatches as `DispatchCommand`s bound
    to `descriptor_set(dispatch)`. ValueError unless every dispatch `alongside` another follows a dispatch."""
    for index, step in enumerate(steps):
        if isinstance(step, Dispatch) and step.alongside and (index == 0 or not isinstance(steps[index - 1], Dispatch)):
            raise ValueError(f"{step.kernel.name} is to run alongside the dispatch before it, but "
                             f"{'it is the first command' if index == 0 else 'recorded commands precede it'}")
    return [step if isinstance(step, Recorded) else
            DispatchCommand(step.kernel, descriptor_set(step), push_bytes(step), checked_group_count(info, step),
                            step.alongside) for step in steps]


def checked_group_count(info: DeviceInfo, dispatch: Dispatch) -> tuple[int, int, int]:
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
