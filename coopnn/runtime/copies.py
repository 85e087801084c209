"""Copies of large arrays between the user's memory and mapped Vulkan memory, spread over several threads.

One core copies about 10 GB/s into mapped device memory and reads about 5 GB/s from host-cached memory; eight reach
26 and 23 GB/s (H100 machine, `../shared/gpu/h100-host-path.md`). numpy releases the GIL while it copies and casts
arrays of numbers, so a small process-wide thread pool gets that bandwidth. `copy_rows` converts the element type and
gathers strided or Fortran-ordered sources in the same pass, so every input is read exactly once.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# Below this many bytes per part a thread costs more than it saves.
MIN_BYTES_PER_THREAD = 1 << 20
COPY_THREADS = max(1, min(8, os.cpu_count() or 1))

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=COPY_THREADS - 1, thread_name_prefix="coopnn-copy")
        return _pool


def copy_rows(dst: np.ndarray, src: np.ndarray) -> None:
    """`dst[...] = src` (same number of rows; any strides; src cast to dst's dtype), split by rows over threads."""
    rows = dst.shape[0]
    nbytes = max(dst.nbytes, src.nbytes)
    parts = min(COPY_THREADS, nbytes // MIN_BYTES_PER_THREAD, rows)
    if parts <= 1:
        np.copyto(dst, src, casting="unsafe")
        return
    bounds = [rows * i // parts for i in range(parts + 1)]
    futures = [_executor().submit(np.copyto, dst[a:b], src[a:b], casting="unsafe")
               for a, b in zip(bounds[1:-1], bounds[2:])]
    np.copyto(dst[:bounds[1]], src[:bounds[1]], casting="unsafe")
    for future in futures:
        future.result()
