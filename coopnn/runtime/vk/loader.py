"""Imports the `vulkan` package on first use and turns a missing package or loader into BackendUnavailableError.

Nothing else in coopnn imports `vulkan` directly: every Vulkan module calls `load_vulkan()`, so the numpy backend and
`import coopnn` never touch the Vulkan loader.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from coopnn.errors import BackendUnavailableError

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


def check(vk: ModuleType, result: int, call: str, accepted: tuple[int, ...] = (0,)) -> None:
    """Raise pyvulkan's exception for `result` of a raw call (pyvulkan's wrappers raise by themselves) unless it is one
    of `accepted` (VK_SUCCESS by default)."""
    if result not in accepted:
        error = vk.exception_codes.get(result)
        raise error(f"{call} returned {result}") if error else RuntimeError(f"{call} returned {result}")
