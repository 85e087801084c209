"""CUDA arrays in and out of coopnn models without a host round trip: PyTorch tensors, CuPy arrays and other producers
of `__cuda_array_interface__` or DLPack, shared with Vulkan through exported memory and semaphores.

`is_cuda_array(x)` says whether an input takes this path; `CudaBridge(executable).run(feeds)` runs it. Importing this
package imports no framework, no CUDA library and no Vulkan loader: `CudaBridge` and `CudaError` load on first use.
"""

from __future__ import annotations

from coopnn.interop.tensors import is_cuda_array

__all__ = ["CudaBridge", "CudaError", "is_cuda_array"]


def __getattr__(name: str):
    if name == "CudaBridge":
        from coopnn.interop.cuda_bridge import CudaBridge

        return CudaBridge
    if name == "CudaError":
        from coopnn.interop.cuda_driver import CudaError

        return CudaError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
