"""Imports the `vulkan` package on first use and turns a missing package or loader into BackendUnavailableError.

Nothing else in coopnn imports `vulkan` directly: every Vulkan module calls `load_vulkan()`, so the numpy backend and
`import coopnn` never touch the Vulkan loader.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from coopnn.errors import BackendUnavailableError, DeviceError, DeviceLostError, DeviceMemoryError

INSTALL_HINT = ("install a Vulkan loader and a driver, e.g. `apt-get install libvulkan1 mesa-vulkan-drivers` "
                "(Mesa's lavapipe runs on the CPU) or your GPU vendor's driver")


def load_vulkan() -> ModuleType:
    """The `vulkan` module, or BackendUnavailableError saying what is missing and how to get it."""
    try:
        return importlib.import_module("vulkan")
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the Python package 'vulkan' is not importable ({exc}); install it with "
            f"`pip install 'vulkan>=1.3.275' cffi`") from exc
    except OSError as exc:
        # pyvulkan dlopens libvulkan.so.1 at import time and raises OSError when no loader is installed.
        raise BackendUnavailableError(
            f"no Vulkan loader (libvulkan.so.1) could be loaded: {exc}; {INSTALL_HINT}") from exc


# VkResult codes that name what went wrong in a way a user can act on.
_OUT_OF_MEMORY = {-1: "VK_ERROR_OUT_OF_HOST_MEMORY", -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY"}
_DEVICE_LOST = -4


def check(vk: ModuleType, result: int, call: str, accepted: tuple[int, ...] = (0,)) -> None:
    """Raise a typed coopnn error for `result` of a raw Vulkan call unless it is one of `accepted` (VK_SUCCESS by
    default): DeviceLostError, DeviceMemoryError, or DeviceError naming the call and the result."""
    if result in accepted:
        return
    if result == _DEVICE_LOST:
        raise DeviceLostError(f"{call} reported VK_ERROR_DEVICE_LOST: the GPU was lost (driver reset, hang or crash); "
                              f"close the model and load it again")
    if result in _OUT_OF_MEMORY:
        raise DeviceMemoryError(f"{call} reported {_OUT_OF_MEMORY[result]}: use smaller batches or free other GPU work")
    error = vk.exception_codes.get(result)
    raise DeviceError(f"{call} returned {result} ({error.__name__ if error else 'unknown VkResult'})")


def result_of(vk: ModuleType, exc: Exception) -> int:
    """The VkResult behind one of pyvulkan's exceptions (VK_ERROR_UNKNOWN when it names none)."""
    return next((code for code, kind in vk.exception_codes.items() if isinstance(exc, kind)), -13)
