"""`RunGate`: many runs at once, or one exclusive change (new weights, closing), never both.

A model serves calls from many threads; replacing its weights or closing it must wait until the calls in flight are
done and must keep new ones out meanwhile. Once closed, every later call raises ModelClosedError (an InputError) at
once.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from coopnn.errors import ModelClosedError


class RunGate:
    def __init__(self, what: str):
        self._what = what
        self._condition = threading.Condition()
        self._running = 0
        self._exclusive = False
        self._closed = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Held by each run; waits while an exclusive change is under way."""
        with self._condition:
            self._condition.wait_for(lambda: not self._exclusive)
            self._check_open()
            self._running += 1
        try:
            yield
        finally:
            with self._condition:
                self._running -= 1
                self._condition.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held alone: waits for the runs in flight to finish, and keeps new ones waiting until it is released."""
        with self._condition:
            self._condition.wait_for(lambda: not self._exclusive)
            self._check_open()
            self._exclusive = True
            self._condition.wait_for(lambda: self._running == 0)
        try:
            yield
        finally:
            with self._condition:
                self._exclusive = False
                self._condition.notify_all()

    def close(self) -> bool:
        """Wait for runs and changes in flight, then refuse all later ones; False when it was closed already."""
        with self._condition:
            self._condition.wait_for(lambda: not self._exclusive and self._running == 0)
            was_open, self._closed = not self._closed, True
            self._condition.notify_all()
            return was_open

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ModelClosedError(f"{self._what} is closed; load it again to run it")
