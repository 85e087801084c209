"""Test-only fault injection at every Vulkan call: the N-th failable call made while `inject` is active returns (raw
`vk.lib` calls) or raises (pyvulkan's wrappers) the VkResult asked for, as a driver would.

Failable calls are those that return a VkResult a driver may fail with (creation, allocation, binding, mapping,
submission, waits, query results, cache data, enumeration). pyvulkan's functions are replaced in the `vulkan`
package itself, below coopnn's typed-error layer (`coopnn.runtime.vk.loader`); raw `lib` calls through proxies of
every coopnn module's `lib` global.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field

import vulkan

FAILABLE = ("vkCreate", "vkAllocate", "vkBind", "vkMapMemory", "vkQueueSubmit", "vkWaitForFences",
            "vkBeginCommandBuffer", "vkEndCommandBuffer", "vkResetFences", "vkGetFenceStatus", "vkQueueWaitIdle",
            "vkDeviceWaitIdle", "vkGetQueryPoolResults", "vkGetPipelineCacheData", "vkEnumerate")
RESULTS = {"out of device memory": -2, "out of host memory": -1, "device lost": -4}
# Calls whose only failure the specification allows is a lost device (a driver never reports memory there).
ONLY_DEVICE_LOST = ("vkGetFenceStatus",)


@dataclass
class Faults:
    """Counts failable calls by name, in order; the call numbered `fail_at` fails with `result`."""

    fail_at: int | None = None
    result: int = -2
    calls: list[str] = field(default_factory=list)

    def fails(self, name: str) -> bool:
        if not name.startswith(FAILABLE):
            return False
        self.calls.append(name)
        return len(self.calls) - 1 == self.fail_at and (self.result == -4 or name not in ONLY_DEVICE_LOST)


class _Lib:
    def __init__(self, lib, faults: Faults):
        self._lib, self._faults = lib, faults

    def __getattr__(self, name: str):
        function = getattr(self._lib, name)
        if not name.startswith("vk"):
            return function
        faults = self._faults

        def call(*args):
            return faults.result if faults.fails(name) else function(*args)

        return call


@contextlib.contextmanager
def inject(faults: Faults):
    """Route every Vulkan call coopnn makes through `faults` while active."""
    patched = []
    for name in dir(vulkan):
        function = getattr(vulkan, name)
        if name.startswith("vk") and callable(function):
            patched.append((vulkan, name, function))

            def call(*args, _name=name, _function=function, **kwargs):
                if faults.fails(_name):
                    raise vulkan.exception_codes[faults.result]("injected")
                return _function(*args, **kwargs)

            setattr(vulkan, name, call)
    proxy = _Lib(vulkan.lib, faults)
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("coopnn") and module.__dict__.get("lib") is vulkan.lib:
            patched.append((module, "lib", vulkan.lib))
            module.lib = proxy
    try:
        yield faults
    finally:
        for owner, name, value in reversed(patched):
            setattr(owner, name, value)
