"""The registry of live Vulkan objects: one entry per handle, destroyed in reverse creation order.

Every Vulkan handle coopnn creates is added here with the function that destroys it. Python objects owning handles
release their entries on `destroy()` or when collected (a `weakref.finalize` holding only the tracker and tokens, never
the owner); `VulkanContext.close()` releases whatever is left, children before the device and the device before the
instance. `counts()` is what the soak and close tests read.
"""

from __future__ import annotations

import weakref
from collections import Counter
from typing import Callable, Iterable


class ObjectTracker:
    """Live Vulkan handles by token, each with its kind (e.g. "VkBuffer") and destroy function."""

    def __init__(self) -> None:
        self._live: dict[int, tuple[str, Callable[[], None]]] = {}
        self._next_token = 0

    def add(self, kind: str, destroy: Callable[[], None]) -> int:
        token = self._next_token
        self._next_token += 1
        self._live[token] = (kind, destroy)
        return token

    def release(self, token: int) -> None:
        """Destroy the handle behind `token`; a token already released is ignored."""
        entry = self._live.pop(token, None)
        if entry is not None:
            entry[1]()

    def release_many(self, tokens: Iterable[int]) -> None:
        """Release `tokens` in the order given (owners list a buffer before the memory bound to it)."""
        for token in tokens:
            self.release(token)

    def release_all(self) -> None:
        """Release everything, last-created first, so objects go before what they were made from."""
        self.release_many(sorted(self._live, reverse=True))

    def alive(self, token: int) -> bool:
        return token in self._live

    def counts(self) -> dict[str, int]:
        """Live handles per kind; empty once everything is destroyed."""
        return dict(Counter(kind for kind, _ in self._live.values()))

    def counts_of(self, tokens: Iterable[int]) -> dict[str, int]:
        """Live handles per kind among `tokens`."""
        return dict(Counter(self._live[t][0] for t in tokens if t in self._live))

    def __len__(self) -> int:
        return len(self._live)


class TrackedHandles:
    """Base of small owners of handles registered with a tracker: `alive` while the first handle is, `destroy()` (or
    collection) releases them in the order given."""

    def _track(self, tracker: ObjectTracker, tokens: list[int]) -> None:
        self._tokens = tokens
        self._tracker = tracker
        self._release = weakref.finalize(self, tracker.release_many, tokens)

    @property
    def alive(self) -> bool:
        return self._release.alive and self._tracker.alive(self._tokens[0])

    def destroy(self) -> None:
        self._release()
