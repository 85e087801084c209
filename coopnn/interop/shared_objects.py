"""Vulkan objects that CUDA uses too: `SharedBuffer` (an exported buffer mapped into CUDA) and `SharedTimeline` (an
exported timeline semaphore imported into CUDA), and `capacity`, which sizes the buffers.

Memory. Every buffer the bridge shares with CUDA (its inputs and pooled outputs) is a device-local Vulkan buffer whose
memory is exported as an opaque fd (`vk_export.ExportedBuffer`) and imported once into CUDA (cuImportExternalMemory,
cuExternalMemoryGetMappedBuffer), so both APIs address the same bytes, in the primary CUDA context of the device whose
UUID is the Vulkan device's. Each object is made, and its CUDA side released, with that context current. The two sides
are released separately (`release_cuda`, `release_vulkan`): the memory is freed once both are, which lets CUDA's import
keep an output's memory after its model closed.
"""

from __future__ import annotations

import os

from coopnn.interop.cuda_driver import CudaDriver, SemaphoreArgs
from coopnn.interop.vk_export import ExportedBuffer, ExportedTimeline

# Inputs and pooled outputs are never made smaller than this (bytes), so small batches of varying size share buffers.
MIN_BUFFER_BYTES = 1 << 16


def capacity(nbytes: int, limit: int) -> int:
    """`nbytes` rounded up to a power of two (at least MIN_BUFFER_BYTES), but to no more than `limit`."""
    rounded = 1 << (max(nbytes, MIN_BUFFER_BYTES) - 1).bit_length()
    return max(nbytes, min(limit, rounded))


class SharedBuffer:
    """An `ExportedBuffer` mapped into CUDA: `pointer` addresses the bytes Vulkan binds through `handle`. It binds like
    `coopnn.runtime.vk.memory.Buffer` (with a GPU address where made with `device_address`). Made, and its CUDA side
    freed, with the CUDA context current."""

    def __init__(self, context, driver: CudaDriver, size: int, device_address: bool = False):
        self.vulkan = ExportedBuffer(context, size, device_address)
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
    def device_address(self) -> int | None:
        return self.vulkan.device_address

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
