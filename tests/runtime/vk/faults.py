"""Test-only fault injection at every Vulkan call: the N-th call of a chosen failable function made while `inject` is
active returns (raw `vk.lib` calls) or raises (pyvulkan's wrappers) the VkResult asked for, as a driver would. (Calls
are counted per function: how often a fence is polled before it signals varies from run to run.)

Failable calls are those that return a VkResult a driver may fail with (creation, allocation, binding, mapping,
submission, waits, query results, cache data, enumeration). A lost device is injected only where the specification
lets a call report it (`errorcodes` in vk.xml), as a driver would. pyvulkan's functions are replaced in the `vulkan`
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
            "vkDeviceWaitIdle", "vkGetQueryPoolResults", "vkGetPipelineCacheData", "vkEnumerate", "vkQueueBindSparse",
            "vkGetEventStatus", "vkGetSemaphoreCounterValue", "vkWaitSemaphores")
DEVICE_LOST = -4
RESULTS = {"out of device memory": -2, "out of host memory": -1, "device lost": DEVICE_LOST}
# Calls whose only failure the specification allows is a lost device (a driver never reports memory there).
ONLY_DEVICE_LOST = ("vkGetFenceStatus",)
# The core calls whose `errorcodes` in vk.xml include VK_ERROR_DEVICE_LOST.
DEVICE_LOST_CALLS = ("vkCreateDevice", "vkQueueSubmit", "vkQueueSubmit2", "vkQueueWaitIdle", "vkDeviceWaitIdle",
                     "vkQueueBindSparse", "vkGetFenceStatus", "vkWaitForFences", "vkGetEventStatus",
                     "vkGetQueryPoolResults", "vkGetSemaphoreCounterValue", "vkWaitSemaphores")


def can_fail(name: str, result: int) -> bool:
    """Whether a driver may report `result` from the call `name`."""
    if result == DEVICE_LOST:
        return name in DEVICE_LOST_CALLS
    return name.startswith(FAILABLE) and name not in ONLY_DEVICE_LOST


@dataclass
class Faults:
    """Records failable calls by name, in order; `fail_at` = (name, n): the n-th call (from 0) of `name` fails with
    `result`."""

    fail_at: tuple[str, int] | None = None
    result: int = -2
    calls: list[str] = field(default_factory=list)
    injected: bool = False

    def fails(self, name: str) -> bool:
        if not name.startswith(FAILABLE):
            return False
        self.calls.append(name)
        if self.fail_at != (name, self.calls.count(name) - 1) or not can_fail(name, self.result):
            return False
        self.injected = True
        return True


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
