"""`VulkanContext`: the instance, the chosen device, and every Vulkan object made on them, closed as one.

A context is made once per model (or per backend) and owns a dispatcher, the pipeline cache and the live-object
registry. Buffers and kernels are created through it and keep it alive; `close()` (or collection of the context once
nothing uses it) waits for the device and destroys everything left, children first. Closing twice is harmless.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from coopnn.runtime.vk.commands import Dispatch, Dispatcher, Recorded
from coopnn.runtime.vk.device import Device, create_device
from coopnn.runtime.vk.device_info import DeviceInfo, query_device_info
from coopnn.runtime.vk.instance import Instance, create_instance
from coopnn.runtime.vk.lane import barrier
from coopnn.runtime.vk.loader import load_vulkan
from coopnn.runtime.vk.memory import Buffer, HostAccess, Placement
from coopnn.runtime.vk.pipeline import ComputeKernel, SpecializationValue
from coopnn.runtime.vk.pipeline_cache import PipelineCache
from coopnn.runtime.vk.selection import select_device
from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()


# NVIDIA's driver (580) fails vkCreateInstance with VK_ERROR_INCOMPATIBLE_DRIVER after about 27 instances were
# created and destroyed in one process with none alive in between; one instance kept for the process's lifetime
# keeps the driver loaded and avoids it. Device listing uses that instance, so nothing is made twice.
_PROCESS_TRACKER = ObjectTracker()
_process_instance: Instance | None = None


def process_instance() -> Instance:
    """The instance (without validation) that lives as long as the process; created on first use."""
    global _process_instance
    if _process_instance is None:
        _process_instance = create_instance(_PROCESS_TRACKER, validation=False)
    return _process_instance


def list_devices() -> list[DeviceInfo]:
    """Every physical device the loader reports."""
    instance = process_instance()
    return [query_device_info(instance.handle, pd, i)
            for i, pd in enumerate(vk.vkEnumeratePhysicalDevices(instance.handle))]


class ObjectOwner:
    """What owns Vulkan objects made through it (a context, or a scope of a shared one): it creates buffers and
    kernels, counts what is alive (`tracker`), and `close()` (its `_closer`) destroys them; closing twice is
    harmless."""

    tracker: ObjectTracker
    _closer: weakref.finalize

    def live_objects(self) -> dict[str, int]:
        """Live Vulkan objects made through this owner, by kind; empty after close()."""
        return self.tracker.counts()

    @property
    def closed(self) -> bool:
        return not self._closer.alive

    def create_buffer(self, size: int, host_access: HostAccess = HostAccess.READ_WRITE,
                      placement: Placement | None = None, device_address: bool = False) -> Buffer:
        self._check_open()
        return Buffer(self, size, host_access, placement, device_address)

    def create_kernel(self, spirv: bytes, binding_count: int, push_constant_size: int = 0,
                      workgroup_size: tuple[int, int, int] = (64, 1, 1),
                      specialization: Mapping[int, SpecializationValue] | None = None, entry_point: str = "main",
                      name: str = "", capture_statistics: bool = False) -> ComputeKernel:
        self._check_open()
        return ComputeKernel(self, spirv, binding_count, push_constant_size, workgroup_size, specialization,
                             entry_point, name, capture_statistics)

    def close(self) -> None:
        """Wait for the device and destroy every Vulkan object made through this owner."""
        self._closer()

    def _check_open(self) -> None:
        """RuntimeError once closed; DeviceLostError once the device was lost (`device.DeviceHealth`)."""
        if self.closed:
            raise RuntimeError(f"this {type(self).__name__} is closed")
        self.device.health.check()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class VulkanContext(ObjectOwner):
    """One Vulkan device ready for compute (the instance and device count among its live objects).

    device: index or case-insensitive name substring (default: COOPNN_DEVICE, else the best device: discrete first).
    features / extensions: exactly what to enable, by Vulkan name (e.g. "shaderFloat16", "cooperativeVector").
    validation: load VK_LAYER_KHRONOS_validation and collect its messages in `debug_messages`.
    pipeline_cache_dir: root of the on-disk pipeline cache (default: see `pipeline_cache.default_cache_root`).
    """

    def __init__(self, device: str | int | None = None, *, features: Iterable[str] = (),
                 extensions: Iterable[str] = (), validation: bool = False, pipeline_cache_dir: Path | None = None):
        self.tracker = ObjectTracker()
        self._idle_waits: list[Callable[[], None]] = []
        self._closer = weakref.finalize(self, _close, self.tracker, self._idle_waits)
        try:
            process_instance()
            self.instance: Instance = create_instance(self.tracker, validation)
            physical_devices = vk.vkEnumeratePhysicalDevices(self.instance.handle)
            self.devices = [query_device_info(self.instance.handle, pd, i) for i, pd in enumerate(physical_devices)]
            self.info: DeviceInfo = select_device(self.devices, device)
            self.device: Device = create_device(self.tracker, physical_devices[self.info.index], self.info,
                                                features, extensions)
            handle = self.device.handle
            self._idle_waits.append(lambda: vk.vkDeviceWaitIdle(handle))
            self.pipeline_cache = PipelineCache(self.info, pipeline_cache_dir)
            # vkQueueSubmit needs the queue externally synchronised; every lane of this context submits under it
            self.queue_lock = threading.Lock()
            self.dispatcher = Dispatcher(self.device, self.tracker, self.queue_lock)
        except BaseException:
            self.close()
            raise

    @property
    def debug_messages(self) -> list[str]:
        """Validation-layer warnings and errors so far (always empty without validation)."""
        return self.instance.messages

    def run(self, steps: Sequence[Dispatch | Recorded],
            downloads: Mapping[Buffer, tuple[int, int]] | None = None) -> float | None:
        """Run `steps` in one submission (see `Dispatcher.run`); GPU ms of the dispatches, or None."""
        self._check_open()
        return self.dispatcher.run(steps, downloads)

    def submit(self, record: Callable[[object], None]) -> None:
        """Record any commands with `record(command_buffer)` and run them to completion, ordered after all earlier
        work on the queue and with their writes visible to later work and to the host."""
        self._check_open()

        def ordered(cmd) -> None:
            barrier(cmd, "after_previous_work")
            record(cmd)
            barrier(cmd, "device_to_host")

        self.dispatcher.submit(ordered)

    def copy(self, src, dst, src_offset: int, dst_offset: int, nbytes: int) -> None:
        """Copy bytes between two VkBuffers now (see `submit` for the ordering)."""
        self.submit(lambda cmd: vk.vkCmdCopyBuffer(cmd, src, dst, 1, vk.VkBufferCopy(
            srcOffset=src_offset, dstOffset=dst_offset, size=nbytes)))


def _close(tracker: ObjectTracker, idle_waits: list[Callable[[], None]]) -> None:
    """The context's finalizer: nothing may be in flight when objects go, and a lost device must not stop the rest
    from being freed."""
    for wait_idle in idle_waits:
        with contextlib.suppress(vk.VkError):
            wait_idle()
    tracker.release_all()
