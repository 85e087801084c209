"""Copies of large arrays between the user's memory and mapped Vulkan memory, spread over several threads, and the
finiteness test of data about to be copied (`sums_finite`), on the same threads.

One core cannot fill the bus into mapped device memory, nor read host-cached memory as fast as several can (the
copy floor of `bench/results/*-host-path.md` is measured with these threads). numpy releases the GIL while it copies
and casts arrays of numbers, so a small process-wide thread pool gets that bandwidth. `copy_rows` converts
the element type and gathers strided or Fortran-ordered sources in the same pass, so every input is read exactly once;
`start_copy` runs one in the background, so that the host path copies one chunk in while the previous one is retired.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# Below this many bytes per part a thread costs more than it saves.
MIN_BYTES_PER_THREAD = 1 << 20
# Bytes of rows `sums_finite` sums at a time: parts this small keep every thread busy to the end, where one part a
# thread waits for the slowest (`bench/results/nvidia-h200-2026-11-28-fit-host-side.md`).
SUM_BYTES = 1 << 22
COPY_THREADS = max(1, min(16, os.cpu_count() or 1))

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            # a copy in and a copy out may run side by side, each on up to COPY_THREADS
            _pool = ThreadPoolExecutor(max_workers=2 * COPY_THREADS, thread_name_prefix="coopnn-copy")
        return _pool


class PendingCopy:
    """Parts of a copy running on the pool; `wait()` returns once all are done (raising the first error)."""

    def __init__(self, futures: list):
        self._futures = futures

    def wait(self) -> None:
        errors = [f.exception() for f in self._futures]
        self._futures = []
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first


def _bounds(dst: np.ndarray, src: np.ndarray, threads: int) -> list[int]:
    rows = dst.shape[0]
    parts = max(1, min(threads, max(dst.nbytes, src.nbytes) // MIN_BYTES_PER_THREAD, rows))
    return [rows * i // parts for i in range(parts + 1)]


def start_copy(dst: np.ndarray, src: np.ndarray, threads: int = COPY_THREADS) -> PendingCopy:
    """Begin `dst[...] = src` (as `copy_rows`) on the pool's threads, in up to `threads` parts, and return at once
    (a copy too small to split is done before returning)."""
    bounds = _bounds(dst, src, threads)
    if len(bounds) == 2:
        # one part: handing it to a thread would cost more than the copy
        np.copyto(dst, src, casting="unsafe")
        return PendingCopy([])
    return PendingCopy([_executor().submit(np.copyto, dst[a:b], src[a:b], casting="unsafe")
                        for a, b in zip(bounds[:-1], bounds[1:])])


def copy_rows(dst: np.ndarray, src: np.ndarray, threads: int = COPY_THREADS) -> None:
    """`dst[...] = src` (same number of rows; any strides; src cast to dst's dtype), split by rows over up to
    `threads` threads, the calling one included."""
    bounds = _bounds(dst, src, threads)
    if len(bounds) == 2:
        np.copyto(dst, src, casting="unsafe")
        return
    pending = PendingCopy([_executor().submit(np.copyto, dst[a:b], src[a:b], casting="unsafe")
                           for a, b in zip(bounds[1:-1], bounds[2:])])
    try:
        np.copyto(dst[:bounds[1]], src[:bounds[1]], casting="unsafe")
    finally:
        pending.wait()


def sums_finite(rows: np.ndarray, threads: int = COPY_THREADS) -> bool:
    """Whether the float32 sums of the 2-D array `rows`, taken in parts of about `SUM_BYTES` over up to `threads`
    threads, are all finite: False where any value is NaN or infinite (and, rarely, where finite values overflow a
    part's sum). One read of the data and no mask of it. Not a BLAS product, although one is as fast: its threads
    spin on the cores for a while after it returns and slow the copy that follows
    (`bench/results/nvidia-h200-2026-11-28-fit-host-side.md`)."""
    step = max(1, SUM_BYTES // max(1, rows.itemsize * int(np.prod(rows.shape[1:], dtype=np.int64))))
    starts = range(0, len(rows), step)

    def finite(start: int) -> bool:
        with np.errstate(over="ignore", invalid="ignore"):
            return bool(np.isfinite(rows[start:start + step].sum(dtype=np.float32)))

    groups = [starts[first::threads] for first in range(min(threads, len(starts)))]
    if len(groups) < 2:
        return all(finite(start) for start in starts)
    return all(_executor().map(lambda group: all(finite(start) for start in group), groups))
