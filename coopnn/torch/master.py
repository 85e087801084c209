"""`MasterWeights`: a module's float32 parameter vector in Vulkan memory that CUDA maps too, and the torch tensor
viewing it, so a torch optimizer updates in place the very bytes coopnn's kernels are refreshed from.

Memory. The vector is a `coopnn.interop.shared_objects.SharedBuffer` (device-local Vulkan memory exported as an
opaque fd and imported into the device's primary CUDA context), laid out by `flat_layout.FlatLayout`; `tensor` views
it through `__cuda_array_interface__` (no copy). Where the model's kernels store float16 weights, a float16 `mirror`
of the same layout sits beside it: the module refreshes it from the vector on the caller's stream (one torch copy)
before the Vulkan side converts it into the kernels' layout (`coopnn.torch.sync`), with the padding of each block
zeroed, since the driver's conversion copies whole padded blocks and torch may have written anything there (an
initialiser over the whole vector).

Lifetimes: the buffers live in a scope of the model's shared Vulkan context of their own, so the model may be
prepared anew under them. `close()` destroys their Vulkan side; each tensor keeps its memory (CUDA's import holds it)
until it is collected, which frees it then, after a cuCtxSynchronize, so a parameter tensor may outlive its module.
"""

from __future__ import annotations

import weakref

import numpy as np
import torch

from coopnn.errors import BackendUnavailableError
from coopnn.interop.cuda_driver import cuda_driver
from coopnn.interop.output_pool import CudaOutput
from coopnn.interop.shared_objects import SharedBuffer
from coopnn.runtime.vk.shared import open_context
from coopnn.torch.flat_layout import FlatLayout


def _free(driver, cuda_context: int, buffer: SharedBuffer) -> None:
    """The last tensor viewing `buffer` was collected: CUDA work queued on it may still run, so wait for it."""
    with driver.current(cuda_context):
        driver.synchronize()
        buffer.release_cuda()
    buffer.release_vulkan()


class MasterWeights:
    """The parameter vector (`tensor`, float32) and, with `halves`, its float16 `mirror`; see the module docstring.
    `executable` is the model's `KernelExecutable` (on `device`, as the model names it), whose shared context the
    buffers join."""

    def __init__(self, executable, device, layout: FlatLayout, ordinal: int, halves: bool):
        context = executable.context
        self.scope = open_context(device, features=executable.binary.features,
                                  extensions=executable.binary.extensions)
        if self.scope.shared_context is not context.shared_context:
            self.scope.close()
            raise BackendUnavailableError(f"{context.info.name}: the model's Vulkan context is not the device's "
                                          f"shared one, so its kernels cannot read a module's parameters")
        self.layout = layout
        self.ordinal = ordinal
        self._driver = cuda_driver()
        self._cuda_context = self._driver.primary_context(ordinal)
        device_address = "bufferDeviceAddress" in self.scope.features
        self.buffers: list[SharedBuffer] = []
        self.buffer, self.tensor = self._shared(layout.size * 4, "<f4", device_address)
        self.mirror_buffer, self.mirror = (self._shared(layout.size * 2, "<f2", device_address) if halves
                                           else (None, None))
        # 1 where a parameter is, 0 in its padding: the mirror's padding stays zero whatever torch wrote there
        self._mask = None if not halves else torch.from_numpy(layout.flatten(
            {name: np.ones(entry.shape, np.float32) for name, entry in layout.entries.items()})).to(self.tensor.device)

    def _shared(self, nbytes: int, typestr: str, device_address: bool):
        with self._driver.current(self._cuda_context):
            buffer = SharedBuffer(self.scope, self._driver, nbytes, device_address)
        self.buffers.append(buffer)
        view = CudaOutput(buffer.pointer, (nbytes // int(typestr[-1]),), typestr)
        weakref.finalize(view, _free, self._driver, self._cuda_context, buffer).atexit = False
        return buffer, torch.as_tensor(view, device=f"cuda:{self.ordinal}")

    def refresh_mirror(self) -> None:
        """The float16 mirror made equal to the vector (its padding zero), on the current stream, allocating
        nothing."""
        if self.mirror is not None:
            torch.mul(self.tensor.detach(), self._mask, out=self.mirror)

    def close(self) -> None:
        for buffer in self.buffers:
            buffer.release_vulkan()
        self.scope.close()
