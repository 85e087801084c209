"""How a rank's gradient on a Vulkan device meets the other ranks' gradients: `CudaTransport` copies it on the GPU
into a buffer shared with CUDA, where `torch.distributed` (NCCL) sums it in place; `HostTransport` reads it back to
the host for any `ProcessGroup` (a gloo group, a test's group, a device without CUDA interop). Either leaves the mean
over ranks where the gradient was, before the optimizer reads it."""

from __future__ import annotations

import numpy as np

from coopnn.distributed.group import ProcessGroup
from coopnn.errors import InputError


class HostTransport:
    """The gradient through host memory: a download, a host all-reduce, an upload."""

    def __init__(self, group: ProcessGroup):
        self.group = group

    def handed_out(self, buffer, count: int) -> list:
        """Commands ending the gradient's submission that hand `count` floats of `buffer` over: none here."""
        return []

    def reduce(self, buffer, count: int) -> None:
        raw = buffer.download(np.float32, count)
        buffer.upload(self.group.all_reduce_sum(raw) / np.float32(self.group.world_size))

    def taken_back(self, buffer, count: int) -> list:
        """Commands starting the optimizer's submission that take the mean back into `buffer`: none here."""
        return []

    def close(self) -> None:
        """Nothing is held between steps."""


class _CudaView:
    """`count` float32 values at a CUDA address, as `__cuda_array_interface__` describes arrays to PyTorch."""

    def __init__(self, pointer: int, count: int):
        self.__cuda_array_interface__ = {"shape": (count,), "typestr": "<f4", "data": (pointer, False),
                                         "strides": None, "version": 3}


class CudaTransport:
    """The gradient through a buffer exported from the session's Vulkan device to CUDA, summed by
    `group.all_reduce_sum_cuda` (a `TorchGroup`): GPU copies in and out, no host copy of the values."""

    def __init__(self, context, group):
        from coopnn.interop.cuda_driver import cuda_driver

        self.context, self.group, self._driver = context, group, cuda_driver()
        self.ordinal = self._driver.ordinal_of_uuid(context.info.device_uuid)
        if self.ordinal is None:
            raise InputError(f"CUDA does not see {context.info.name}, this rank's training device; check "
                             f"CUDA_VISIBLE_DEVICES and LOCAL_RANK")
        self._cuda_context = self._driver.primary_context(self.ordinal)
        self._shared = None

    def _buffer(self, nbytes: int):
        from coopnn.interop.shared_objects import SharedBuffer

        if self._shared is None or self._shared.size < nbytes:
            self.close()
            with self._driver.current(self._cuda_context):
                self._shared = SharedBuffer(self.context, self._driver, nbytes)
        return self._shared

    def _copy(self, source, destination, nbytes: int, access: int) -> list:
        """Take the shared buffer from CUDA, copy, and give it back once the copy's `access` is done."""
        from coopnn.interop.slot import QUEUE_FAMILY_EXTERNAL, ownership_barriers
        from coopnn.runtime.vk.commands import Recorded
        from coopnn.runtime.vk.loader import load_vulkan

        vk = load_vulkan()
        family, shared = self.context.device.queue_family, self._shared
        taken = ownership_barriers([shared], QUEUE_FAMILY_EXTERNAL, family, 0, access)
        given = ownership_barriers([shared], family, QUEUE_FAMILY_EXTERNAL, access, 0)
        region = vk.ffi.new("VkBufferCopy*", {"srcOffset": 0, "dstOffset": 0, "size": nbytes})
        stages = vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT

        def record(cmd) -> None:
            vk.lib.vkCmdPipelineBarrier(cmd, stages, stages, 0, 0, vk.ffi.NULL, 1, taken, 0, vk.ffi.NULL)
            vk.lib.vkCmdCopyBuffer(cmd, source.handle, destination.handle, 1, region)
            vk.lib.vkCmdPipelineBarrier(cmd, stages, stages, 0, 0, vk.ffi.NULL, 1, given, 0, vk.ffi.NULL)

        return [Recorded(record)]

    def handed_out(self, buffer, count: int) -> list:
        from coopnn.runtime.vk.loader import load_vulkan

        shared = self._buffer(4 * count)
        return self._copy(buffer, shared, 4 * count, load_vulkan().VK_ACCESS_TRANSFER_WRITE_BIT)

    def reduce(self, buffer, count: int) -> None:
        import torch

        values = torch.as_tensor(_CudaView(self._shared.pointer, count), device=torch.device("cuda", self.ordinal))
        self.group.all_reduce_sum_cuda(values)
        values.div_(self.group.world_size)
        torch.cuda.synchronize(self.ordinal)  # the next Vulkan submission reads what NCCL wrote

    def taken_back(self, buffer, count: int) -> list:
        from coopnn.runtime.vk.loader import load_vulkan

        return self._copy(self._shared, buffer, 4 * count, load_vulkan().VK_ACCESS_TRANSFER_READ_BIT)

    def close(self) -> None:
        """Free the shared buffer (no submission may still use it)."""
        if self._shared is not None:
            with self._driver.current(self._cuda_context):
                self._shared.release_cuda()
            self._shared.release_vulkan()
            self._shared = None
