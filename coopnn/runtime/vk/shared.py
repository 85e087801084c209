"""One Vulkan context per device per process, shared by every model, trainer and device array on it.

`open_context(device)` hands out a `ContextScope`: a view of the device's shared `VulkanContext` that records the
buffers, kernels and other objects made through it and destroys them, and only them, on `close()`. The shared context
enables every feature and extension that some part of coopnn has declared it may use (`want`) and the device has, so a
model's weight buffer, a trainer's buffers and a device array live in one VkDevice and one can be copied into
another on the GPU. It is closed when its last scope closes.

A scope asking for something the live context was made without (declared after it was created) gets a new shared
context that has it; the older one lives on for its scopes. So does a context whose device was lost
(`device.DeviceHealth`): its scopes fail with DeviceLostError, and a scope asked for after the loss (a model loaded
again) gets a new device.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from typing import Callable, Iterable

from coopnn.errors import BackendUnavailableError, DeviceLostError
from coopnn.runtime.vk.context import ObjectOwner, VulkanContext, list_devices
from coopnn.runtime.vk.loader import load_vulkan
from coopnn.runtime.vk.selection import select_device
from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()

# The Khronos validation layer is switched on by this variable (tests set it; it slows everything down).
VALIDATION_ENV = "COOPNN_VALIDATION"

# From the start, whenever the device lists them: what exchanging memory and semaphores with CUDA needs
# (`coopnn.interop`), and importing host memory for results (`runtime/vk/host_import.py`).
_wanted_features: set[str] = {"timelineSemaphore"}
_wanted_extensions: set[str] = {"VK_KHR_external_memory_fd", "VK_KHR_external_semaphore_fd",
                                "VK_EXT_external_memory_host"}
_contexts: dict[tuple[int, bool], list[_Shared]] = {}
_lock = threading.Lock()


def validation_requested() -> bool:
    return os.environ.get(VALIDATION_ENV, "") not in ("", "0")


@functools.lru_cache(maxsize=1)
def vulkan_devices():
    """Every Vulkan device (DeviceInfo), listed once per process; BackendUnavailableError without a loader."""
    return tuple(list_devices())


def chosen_device(device: str | int | None):
    """The DeviceInfo of `device`: an index or case-insensitive name substring, or None for COOPNN_DEVICE, else the
    best device (discrete first)."""
    return select_device(list(vulkan_devices()), device)


def want(features: Iterable[str] = (), extensions: Iterable[str] = ()) -> None:
    """Declare features and extensions some kernel or interop path may use; shared contexts made from now on enable
    those the device has."""
    with _lock:
        _wanted_features.update(features)
        _wanted_extensions.update(extensions)


class _Shared:
    """A shared context and the number of open scopes on it."""

    def __init__(self, context: VulkanContext):
        self.context = context
        self.users = 0

    def serves(self, features: frozenset[str], extensions: frozenset[str]) -> bool:
        """Whether a new scope asking for `features` and `extensions` may use this context."""
        device = self.context.device
        return features <= device.features and extensions <= device.extensions and device.health.lost is None


def refuse_lacking(info, features: Iterable[str], extensions: Iterable[str] = (), what: str = "") -> None:
    """BackendUnavailableError naming the `features` and `extensions` (needed by `what`, where given) that the device
    of `info` lacks: a shader module declaring one fails in the driver rather than with a reason."""
    missing = sorted(f for f in features if not info.features.get(f)) + sorted(set(extensions) - info.extensions)
    if missing and what:
        raise BackendUnavailableError(f"{what} needs {', '.join(missing)}, which {info.describe()} lacks")
    if missing:
        raise BackendUnavailableError(f"{info.describe()} lacks {', '.join(missing)}")


def open_context(device: str | int | None = None, *, features: Iterable[str] = (), extensions: Iterable[str] = (),
                 validation: bool | None = None) -> ContextScope:
    """A scope on the newest shared context of `device` (see `chosen_device`) that has what is asked for.

    features / extensions: what the caller needs; BackendUnavailableError naming them when the device lacks any.
    validation: the Khronos validation layer (default: COOPNN_VALIDATION); contexts with and without it are apart.
    """
    features, extensions = frozenset(features), frozenset(extensions)
    validation = validation_requested() if validation is None else validation
    info = chosen_device(device)
    refuse_lacking(info, features, extensions)
    key = (info.index, validation)
    with _lock:
        _wanted_features.update(features)
        _wanted_extensions.update(extensions)
        shared = next((s for s in reversed(_contexts.get(key, [])) if s.serves(features, extensions)), None)
        if shared is None:
            shared = _Shared(VulkanContext(
                info.index, validation=validation,
                features={f for f in _wanted_features if info.features.get(f)},
                extensions=_wanted_extensions & info.extensions))
            _contexts.setdefault(key, []).append(shared)
        shared.users += 1
    return ContextScope(shared, key)


def _leave(shared: _Shared, key: tuple[int, bool]) -> None:
    with _lock:
        shared.users -= 1
        if shared.users:
            return
        _contexts[key].remove(shared)
    shared.context.close()


class _ScopedTracker:
    """The shared context's tracker, remembering which handles were made through one scope."""

    def __init__(self, parent: ObjectTracker):
        self.parent = parent
        self.tokens: set[int] = set()
        self.lock = threading.Lock()

    def add(self, kind: str, destroy: Callable[[], None]) -> int:
        token = self.parent.add(kind, destroy)
        with self.lock:
            self.tokens.add(token)
        return token

    def release(self, token: int) -> None:
        with self.lock:
            self.tokens.discard(token)
        self.parent.release(token)

    def release_many(self, tokens: Iterable[int]) -> None:
        for token in tokens:
            self.release(token)

    def release_all(self) -> None:
        with self.lock:
            tokens = sorted(self.tokens, reverse=True)
        self.release_many(tokens)

    def alive(self, token: int) -> bool:
        return self.parent.alive(token)

    def counts(self) -> dict[str, int]:
        with self.lock:
            tokens = set(self.tokens)
        return self.parent.counts_of(tokens)

    def __len__(self) -> int:
        return len(self.tokens)


class ContextScope(ObjectOwner):
    """What one model, trainer or arena holds of a shared context: it creates buffers and kernels like a
    `VulkanContext` (everything else is the shared context's) and `close()` waits for the queue, destroys what it
    made, and closes the shared context if it was the last scope."""

    def __init__(self, shared: _Shared, key: tuple[int, bool]):
        self.shared_context = shared.context
        self.tracker = _ScopedTracker(shared.context.tracker)
        self._closer = weakref.finalize(self, _close_scope, self.tracker, shared, key)

    def __getattr__(self, name: str):
        return getattr(self.shared_context, name)

    @property
    def features(self) -> frozenset[str]:
        return self.shared_context.device.features


def _close_scope(tracker: _ScopedTracker, shared: _Shared, key: tuple[int, bool]) -> None:
    """Objects of a scope may still be in flight on the shared queue: wait for it (holding the queue's lock, which
    vkQueueWaitIdle needs) before destroying them. A failed wait does not stop them being destroyed; a lost device is
    recorded for the context's other scopes."""
    context = shared.context
    if not context.closed and len(tracker):
        with context.queue_lock, contextlib.suppress(vk.VkError):
            try:
                vk.vkQueueWaitIdle(context.device.queue)
            except DeviceLostError as e:
                context.device.health.record(e)
                raise
    tracker.release_all()
    _leave(shared, key)
