"""`CudaRows`: a Vulkan buffer that CUDA fills with rows of a CUDA array (PyTorch, CuPy, ...) on the GPU, for data
then used by Vulkan alone: a training data set uploaded once (`coopnn.train.gpu.resident`), or each batch of
`Trainer.step` (`coopnn.train.gpu.batch_inputs`).

The buffer is exported to CUDA (`shared_objects.SharedBuffer`). `fill` copies rows on the array's stream, waits for
CUDA, and hands the buffer to the Vulkan queue's family (a queue-family ownership transfer from
VK_QUEUE_FAMILY_EXTERNAL) before any dispatch reads it. A caller that records the transfers itself takes the parts:
`copy_in`; then `wait`, or a `CopiedSignal` that its submission waits for on the GPU; and the barrier arrays of
`acquired` and `released` for its own submission. It binds like `coopnn.runtime.vk.memory.Buffer`.
"""

from __future__ import annotations

from typing import Sequence

from coopnn.errors import InputError
from coopnn.interop.cuda_driver import cuda_driver
from coopnn.interop.shared_objects import SharedBuffer, SharedTimeline
from coopnn.interop.slot import QUEUE_FAMILY_EXTERNAL, ownership_barriers
from coopnn.interop.tensors import CudaInput
from coopnn.interop.vk_export import interop_unavailable_reason
from coopnn.runtime.vk.loader import load_vulkan

vk = load_vulkan()
ffi, lib = vk.ffi, vk.lib


class CudaRows:
    """`size` bytes on `context`'s device that CUDA can write; InputError when CUDA cannot reach them."""

    def __init__(self, context, size: int):
        reason = interop_unavailable_reason(context)
        if reason is not None:
            raise InputError(f"CUDA arrays cannot be copied to the training device: {reason}; pass numpy arrays")
        self._context, self._driver = context, cuda_driver()
        ordinal = self._driver.ordinal_of_uuid(context.info.device_uuid)
        if ordinal is None:
            raise InputError(f"CUDA does not see {context.info.name}, the training device; check "
                             f"CUDA_VISIBLE_DEVICES or pass numpy arrays")
        self.device = ordinal
        self._cuda_context = self._driver.primary_context(ordinal)
        with self._driver.current(self._cuda_context):
            self._shared = SharedBuffer(context, self._driver, size)
        self._vulkan_owns = False

    @property
    def handle(self):
        return self._shared.handle

    @property
    def size(self) -> int:
        return self._shared.size

    @property
    def serial(self) -> int:
        return self._shared.serial

    def fill(self, source: CudaInput, start: int, stop: int) -> None:
        """Rows `start` to `stop` of `source`, packed from byte 0; done when this returns."""
        if self._vulkan_owns:  # handed back to CUDA once earlier dispatches are done with it
            self._ownership(released([self], vk.VK_ACCESS_SHADER_READ_BIT))
        self.copy_in(source, start, stop)
        self.wait()
        self._ownership(acquired([self], vk.VK_ACCESS_SHADER_READ_BIT))
        self._vulkan_owns = True

    def copy_in(self, source: CudaInput, start: int, stop: int) -> None:
        """Queue the copy of rows `start` to `stop` of `source`, packed from byte 0, on its stream; the buffer must
        be CUDA's (released by Vulkan, or never acquired), and is written once `wait` returns."""
        if source.device is not None and source.device != self.device:
            raise InputError(f"the training data is on cuda:{source.device}; the model trains on "
                             f"{self._context.info.name}, which is cuda:{self.device}")
        with self._driver.current(self._cuda_context):
            self._driver.copy_rows(self._shared.pointer, source.pointer + start * source.pitch, source.row_bytes,
                                   stop - start, source.pitch, source.stream)

    def wait(self) -> None:
        """Until the copies queued by `copy_in` are done."""
        with self._driver.current(self._cuda_context):
            self._driver.synchronize()

    def _ownership(self, barriers) -> None:
        self._context.submit(lambda cmd: lib.vkCmdPipelineBarrier(
            cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 0, ffi.NULL,
            1, barriers, 0, ffi.NULL))

    def destroy(self) -> None:
        with self._driver.current(self._cuda_context):
            self._shared.release_cuda()
        self._shared.release_vulkan()


class CopiedSignal:
    """A timeline semaphore shared by the Vulkan device and the CUDA context of `rows`: `after(stream)` has CUDA raise
    it once the copies queued on `stream` so far are done, and gives the (semaphore, value) a Vulkan submission waits
    for, so that the GPU orders the two APIs and the host waits for neither: a host wait would hold the step's
    submission back behind CUDA's copies. Made and freed with the CUDA context current."""

    def __init__(self, rows: CudaRows):
        self._driver, self._cuda_context = rows._driver, rows._cuda_context
        with self._driver.current(self._cuda_context):
            self._timeline = SharedTimeline(rows._context, self._driver)

    def after(self, stream: int) -> tuple[object, int]:
        timeline = self._timeline
        with self._driver.current(self._cuda_context):
            self._driver.signal(timeline.args, timeline.value + 1, stream)
        timeline.value += 1
        return timeline.handle, timeline.value

    def destroy(self) -> None:
        """Free the semaphore; no submission may still wait for it."""
        with self._driver.current(self._cuda_context):
            self._timeline.release_cuda()
        self._timeline.release_vulkan()


def acquired(buffers: Sequence[CudaRows], access: int):
    """The barrier array that hands `buffers` (of one context) from CUDA to its Vulkan queue, for accesses `access`."""
    family = buffers[0]._context.device.queue_family
    return ownership_barriers([b._shared for b in buffers], QUEUE_FAMILY_EXTERNAL, family, 0, access)


def released(buffers: Sequence[CudaRows], access: int):
    """The barrier array that hands `buffers` back to CUDA once Vulkan's accesses `access` are done."""
    family = buffers[0]._context.device.queue_family
    return ownership_barriers([b._shared for b in buffers], family, QUEUE_FAMILY_EXTERNAL, access, 0)
