"""Imports the `vulkan` package on first use and turns a missing package or loader into BackendUnavailableError.

Nothing else in coopnn imports `vulkan` directly: every Vulkan module calls `load_vulkan()`, so the numpy backend and
`import coopnn` never touch the Vulkan loader. What it returns is the package with every `vk*` function wrapped so
that the exceptions pyvulkan raises for a VkResult are also coopnn errors: each is re-raised as a class deriving from
both the pyvulkan class (so `except vk.VkError` in coopnn still catches it) and `DeviceMemoryError`,
`DeviceLostError` or `DeviceError`, naming the call. So no raw `vulkan` exception reaches a user. Raw `vk.lib`
calls return their VkResult, which `check` turns into the same errors.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from coopnn.errors import BackendUnavailableError, DeviceError, DeviceLostError, DeviceMemoryError

INSTALL_HINT = ("install a Vulkan loader and a driver, e.g. `apt-get install libvulkan1 mesa-vulkan-drivers` "
                "(Mesa's lavapipe runs on the CPU) or your GPU vendor's driver")


_checked: ModuleType | None = None


def load_vulkan() -> ModuleType:
    """The `vulkan` module with typed errors (module docstring), or BackendUnavailableError saying what is missing and
    how to get it."""
    global _checked
    if _checked is None:
        _checked = _TypedErrors(_import_vulkan())
    return _checked


def _import_vulkan() -> ModuleType:
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
_UNKNOWN = -13  # VK_ERROR_UNKNOWN


def check(vk: ModuleType, result: int, call: str, accepted: tuple[int, ...] = (0,)) -> None:
    """Raise a typed coopnn error for `result` of a raw Vulkan call unless it is one of `accepted` (VK_SUCCESS by
    default): DeviceLostError, DeviceMemoryError, or DeviceError naming the call and the result."""
    if result in accepted:
        return
    kind, message = _error_for(vk, result, call)
    raise kind(message)


def _error_for(vk: ModuleType, result: int, call: str) -> tuple[type, str]:
    """The coopnn error class for VkResult `result` of `call`, and its message."""
    if result == _DEVICE_LOST:
        return DeviceLostError, (f"{call} reported VK_ERROR_DEVICE_LOST: the GPU was lost (driver reset, hang or "
                                 f"crash); close the model and load it again")
    if result in _OUT_OF_MEMORY:
        return DeviceMemoryError, f"{call} reported {_OUT_OF_MEMORY[result]}: use smaller batches or free other GPU work"
    error = vk.exception_codes.get(result)
    return DeviceError, f"{call} returned {result} ({error.__name__ if error else 'unknown VkResult'})"


class _TypedErrors(ModuleType):
    """The `vulkan` package seen through: `vk*` functions re-raise pyvulkan's VkResult exceptions as classes that are
    also coopnn errors; everything else is the package's own."""

    def __init__(self, vulkan: ModuleType):
        super().__init__(vulkan.__name__, vulkan.__doc__)
        self._vulkan = vulkan
        self._classes: dict[type, type] = {}
        codes = {kind: code for code, kind in vulkan.exception_codes.items()}
        raised = tuple(codes)
        for name in dir(vulkan):
            if name.startswith("vk") and callable(getattr(vulkan, name)):
                setattr(self, name, self._wrap(name, raised, codes))

    def _wrap(self, name: str, raised: tuple[type, ...], codes: dict[type, int]):
        vulkan = self._vulkan

        def call(*args, **kwargs):
            try:
                # looked up at each call, so that the fault-injection tests can stand in for the driver
                return getattr(vulkan, name)(*args, **kwargs)
            except raised as exc:
                kind, message = _error_for(vulkan, codes.get(type(exc), _UNKNOWN), name)
                raise self._typed(type(exc), kind)(message) from exc

        call.__name__ = call.__qualname__ = name
        return call

    def _typed(self, vulkan_class: type, coopnn_class: type) -> type:
        if vulkan_class not in self._classes:
            self._classes[vulkan_class] = type(vulkan_class.__name__, (coopnn_class, vulkan_class),
                                               {"__module__": __name__})
        return self._classes[vulkan_class]

    def __getattr__(self, name: str):
        return getattr(self._vulkan, name)


def result_of(vk: ModuleType, exc: Exception) -> int:
    """The VkResult behind one of pyvulkan's exceptions (VK_ERROR_UNKNOWN when it names none)."""
    return next((code for code, kind in vk.exception_codes.items() if isinstance(exc, kind)), _UNKNOWN)
