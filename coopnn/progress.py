"""A dependency-free progress bar on stderr for long loops (benchmarks, training).

On a terminal it redraws one line in place (at most every `min_interval` seconds); when the stream is not a terminal
(a log file, CI) it writes a plain line at every tenth of the way instead, so logs stay short and readable. `note()`
prints a message above the bar without tearing it.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

LOG_STEPS = 10  # lines written over a whole run when the stream is not a terminal


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """`total` steps; `advance(detail=...)` after each; use it in a `with` or call `close()` at the end."""

    def __init__(self, total: int, label: str = "", stream: TextIO | None = None, width: int = 28,
                 min_interval: float = 0.1):
        self.total = max(int(total), 0)
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.min_interval = min_interval
        self.done = 0
        self.detail = ""
        self.terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        self._start = time.monotonic()
        self._last_draw = float("-inf")
        self._logged_step = 0
        self._line_width = 0
        self._closed = False

    def advance(self, steps: int = 1, detail: str = "") -> None:
        self.done = min(self.done + steps, self.total)
        self.detail = detail
        if self.terminal:
            now = time.monotonic()
            if now - self._last_draw >= self.min_interval or self.done == self.total:
                self._draw()
                self._last_draw = now
        else:
            step = self.done * LOG_STEPS // self.total if self.total else LOG_STEPS
            if step > self._logged_step:
                self._logged_step = step
                self.stream.write(self.line() + "\n")
                self.stream.flush()

    def note(self, message: str) -> None:
        """Print `message` on its own line, keeping the bar below it on a terminal."""
        if self.terminal:
            self._clear()
        self.stream.write(message + "\n")
        if self.terminal and not self._closed:
            self._draw()
        self.stream.flush()

    def line(self) -> str:
        """The bar as text: label, bar, count, percentage, elapsed time, estimate of the time left, detail."""
        fraction = self.done / self.total if self.total else 1.0
        filled = int(fraction * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.monotonic() - self._start
        left = f" eta {_duration(elapsed / fraction - elapsed)}" if 0 < fraction < 1 else ""
        head = f"{self.label} " if self.label else ""
        tail = f" {self.detail}" if self.detail else ""
        return f"{head}[{bar}] {self.done}/{self.total} {fraction:4.0%} {_duration(elapsed)}{left}{tail}"

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.terminal:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self) -> None:
        # a line longer than the terminal would wrap, and "\r" would then redraw only its last part
        text = self.line()[:shutil.get_terminal_size().columns - 1]
        self.stream.write("\r" + text.ljust(self._line_width))
        self._line_width = len(text)
        self.stream.flush()

    def _clear(self) -> None:
        self.stream.write("\r" + " " * self._line_width + "\r")
        self._line_width = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
