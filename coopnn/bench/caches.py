"""Cold and warm caches for first-call timings: coopnn's pipeline cache pointed at a chosen directory, and the drivers'
own shader caches switched off so that "cold" really compiles.

With the drivers' caches off, the only thing that makes a second first call faster is coopnn's own pipeline cache,
which is what the warm first-call time measures.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from coopnn.disk_cache import CACHE_DIR_ENV

# Read by the drivers when they load, so these must be set before the first Vulkan instance is made.
DRIVER_SHADER_CACHE_SWITCHES = {
    "__GL_SHADER_DISK_CACHE": "0",  # NVIDIA's shader disk cache
    "MESA_SHADER_CACHE_DISABLE": "true",  # Mesa's (lavapipe, RADV, ANV)
}


def disable_driver_shader_caches() -> dict[str, str]:
    """Switch the drivers' disk caches off for this process (a value the user set wins); returns what is in force."""
    for name, value in DRIVER_SHADER_CACHE_SWITCHES.items():
        os.environ.setdefault(name, value)
    return {name: os.environ[name] for name in DRIVER_SHADER_CACHE_SWITCHES}


@contextlib.contextmanager
def pipeline_cache_at(directory: Path) -> Iterator[None]:
    """coopnn's on-disk caches (pipelines, converted weights) live under `directory` while the block runs (empty:
    cold; reused: warm)."""
    previous = os.environ.get(CACHE_DIR_ENV)
    os.environ[CACHE_DIR_ENV] = str(directory)
    try:
        yield
    finally:
        if previous is None:
            del os.environ[CACHE_DIR_ENV]
        else:
            os.environ[CACHE_DIR_ENV] = previous
