"""Running a compiled `Binary` on a Vulkan device: the executable shared by every SPIR-V target's backend.

The weight buffer is uploaded once; input and output buffers are made on the first run and grown only when a
larger batch arrives, up to a chunk size bounded by the device's limits, so that `run()` only uploads, dispatches
and downloads. Larger batches run chunk by chunk.
"""

from __future__ import annotations

import functools
import os
from typing import Callable, Mapping

import numpy as np

from coopnn.errors import BackendUnavailableError, CompileError
from coopnn.graph.ir import Graph
from coopnn.layouts.pack import PackedWeights
from coopnn.shaders.targets import Binary

# One chunk's input or output buffer stays below this, so a huge batch never needs huge device allocations.
MAX_IO_BUFFER_BYTES = 128 << 20
# The Khronos validation layer is switched on by this variable (tests set it; it slows everything down).
VALIDATION_ENV = "COOPNN_VALIDATION"


@functools.lru_cache(maxsize=1)
def vulkan_devices():
    """Every Vulkan device (DeviceInfo), or BackendUnavailableError when there is no loader or package."""
    from coopnn.runtime.vk.context import list_devices

    return tuple(list_devices())


def chosen_device(device: str | int | None):
    from coopnn.runtime.vk.selection import select_device

    return select_device(list(vulkan_devices()), device)


def validation_requested() -> bool:
    return os.environ.get(VALIDATION_ENV, "") not in ("", "0")


class KernelExecutable:
    """A Binary bound to its own VulkanContext, ready to run batches."""

    def __init__(self, binary: Binary, graph: Graph, device: str | int | None):
        from coopnn.runtime.vk.context import VulkanContext
        from coopnn.runtime.vk.memory import HostAccess

        self.binary = binary
        self.graph = graph
        self.context = VulkanContext(device, features=binary.features, extensions=binary.extensions,
                                     validation=validation_requested())
        try:
            info = self.context.info
            self.kernel = self.context.create_kernel(binary.spirv, len(binary.bindings), binary.push_constant_size,
                                                     binary.workgroup_size, entry_point=binary.entry_point,
                                                     name=graph.name)
            # with device addresses, the weights can be converted into place on the device (`refresh` of coopvec)
            self.weights = self.context.create_buffer(len(binary.weights.data), HostAccess.NONE,
                                                      device_address="bufferDeviceAddress" in binary.features)
            self.weights.upload(np.frombuffer(binary.weights.data, np.uint8))
            self.inputs = [b for b in binary.bindings if b.role == "input"]
            self.outputs = [b for b in binary.bindings if b.role == "output"]
            widest = max(max(b.features * b.itemsize for b in binary.bindings if b.role != "weights"), 1)
            group_limit = info.limits.max_compute_work_group_count[0] * binary.workgroup_size[0]
            range_limit = info.limits.max_storage_buffer_range // widest
            self.max_chunk = max(1, min(group_limit, range_limit, MAX_IO_BUFFER_BYTES // widest))
            self.capacity = 0
            self.io_buffers: dict[int, object] = {}
            self.last_gpu_ms: float | None = None
        except BaseException:
            self.context.close()
            raise

    def _ensure_capacity(self, samples: int) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        if samples <= self.capacity:
            return
        capacity = min(self.max_chunk, 1 << max(samples - 1, 1).bit_length())
        for buffer in self.io_buffers.values():
            buffer.destroy()
        self.io_buffers = {}
        for b in self.inputs + self.outputs:
            access = HostAccess.WRITE if b.role == "input" else HostAccess.READ
            self.io_buffers[b.index] = self.context.create_buffer(capacity * b.features * b.itemsize, access)
        self.capacity = capacity

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        from coopnn.runtime.vk.commands import Dispatch
        from coopnn.runtime.vk.memory import Placement

        batch = next(iter(feeds.values())).shape[0]
        outputs = {b.name: np.empty((batch, b.features), np.float32) for b in self.outputs}
        self.last_gpu_ms = 0.0
        for start in range(0, batch, self.max_chunk):
            n = min(self.max_chunk, batch - start)
            self._ensure_capacity(n)
            for b in self.inputs:
                chunk = feeds[b.name][start:start + n].reshape(n, -1)
                self.io_buffers[b.index].write(np.ascontiguousarray(chunk, dtype=b.numpy_dtype).reshape(-1))
            buffers = (self.weights,) + tuple(self.io_buffers[b.index] for b in self.inputs + self.outputs)
            groups = -(-n // self.binary.workgroup_size[0])
            # only staged buffers are copied back; direct ones are read in place
            downloads = {self.io_buffers[b.index]: (0, n * b.features * b.itemsize) for b in self.outputs
                         if self.io_buffers[b.index].placement is Placement.STAGED}
            gpu_ms = self.context.run([Dispatch(self.kernel, buffers, np.uint32([n]), groups)], downloads)
            self.last_gpu_ms = None if gpu_ms is None else self.last_gpu_ms + gpu_ms
            for b in self.outputs:
                outputs[b.name][start:start + n] = self.io_buffers[b.index].read(b.numpy_dtype, n * b.features).reshape(
                    n, b.features)
        return self._shape_outputs(outputs, batch)

    def _shape_outputs(self, flat: dict[str, np.ndarray], batch: int) -> dict[str, np.ndarray]:
        shaped = {}
        for v in self.graph.outputs:
            array = flat[v.name].reshape((batch,) + v.features)
            shaped[v.name] = array != 0 if v.dtype == "bool" else array
        return shaped

    def replace_weights(self, packed: PackedWeights) -> bool:
        """Upload new weight values laid out as the current ones (same entries); False, leaving the weights as they
        were, when the layout differs and the model needs preparing anew."""
        if packed.entries != self.binary.weights.entries or len(packed.data) != len(self.binary.weights.data):
            return False
        self.weights.upload(np.frombuffer(packed.data, np.uint8))
        return True

    @property
    def debug_messages(self) -> list[str]:
        return list(self.context.debug_messages)

    def close(self) -> None:
        self.context.close()


def device_unavailable_reason(device: str | int | None, needs: Callable[[object], str | None]) -> str | None:
    """None when a Vulkan device is there and `needs(info)` accepts it; otherwise why not."""
    try:
        info = chosen_device(device)
    except BackendUnavailableError as e:
        return str(e)
    return needs(info)


def compile_or_reason(compile_fn: Callable[[], Binary]) -> tuple[Binary | None, str | None]:
    try:
        return compile_fn(), None
    except CompileError as e:
        return None, str(e)
