"""The on-disk pipeline cache: one file per (device, driver) and pipeline, so a second run skips shader compilation.

Files live under `<root>/<device uuid>-<driver version>-<pipeline cache uuid>/<sha256 of the pipeline>.bin`, where the
pipeline hash covers the SPIR-V, entry point, specialization constants and layout. `root` is `$COOPNN_CACHE_DIR/
pipelines`, else `$XDG_CACHE_HOME/coopnn/pipelines`, else `~/.cache/coopnn/pipelines`. Files are framed and written by
`coopnn.disk_cache`, with a SHA-256 of the driver's blob; a file that fails the check is deleted (with one warning)
and counted in `discarded`, so a corrupt or truncated file costs one recompilation, never a driver fed garbage, and
concurrent processes never see half a file. A device's folder keeps its `MAX_ENTRIES` most recently used pipelines.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

from coopnn.disk_cache import CacheFolder, EntryFormat, cache_dir
from coopnn.runtime.vk.device_info import DeviceInfo
from coopnn.runtime.vk.loader import check, load_vulkan
from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()

FORMAT = EntryFormat(b"COOPNNPC", 1)
# Pipelines kept per device folder: several hundred models' kernels, a few MB of driver blobs.
MAX_ENTRIES = 1024


def default_cache_root() -> Path:
    return cache_dir("pipelines")


def device_key(info: DeviceInfo) -> str:
    return f"{info.device_uuid}-{info.driver_version:08x}-{info.pipeline_cache_uuid}"


@dataclass(frozen=True)
class PipelineKey:
    """What identifies a compiled compute pipeline on one device and driver."""

    spirv: bytes
    entry_point: str
    specialization: bytes
    binding_count: int
    push_constant_size: int

    def digest(self) -> str:
        h = hashlib.sha256()
        for part in (self.spirv, self.entry_point.encode(), self.specialization,
                     struct.pack("<II", self.binding_count, self.push_constant_size)):
            h.update(struct.pack("<Q", len(part)))
            h.update(part)
        return h.hexdigest()


class PipelineCache:
    """Loads and stores driver pipeline-cache blobs; the counters say what happened, for tests and `coopnn info`."""

    def __init__(self, info: DeviceInfo, root: Path | None):
        self.folder = CacheFolder("pipeline", (root or default_cache_root()) / device_key(info), FORMAT)
        self.directory = self.folder.root
        self.hits = 0
        self.misses = 0
        self.discarded = 0
        self.write_failures = 0

    def path(self, key: PipelineKey) -> Path:
        return self.folder.path(key.digest())

    def load(self, key: PipelineKey) -> bytes | None:
        """The stored blob for `key`, or None (a damaged file is deleted)."""
        existed = self.path(key).exists()
        blob = self.folder.read(key.digest())
        if blob is None:
            self.misses += 1
            self.discarded += existed  # a file there that was no intact entry: deleted by `read`
            return None
        self.hits += 1
        self.folder.touch(key.digest())
        return blob

    def store(self, key: PipelineKey, blob: bytes) -> None:
        """Write `blob` atomically; an unwritable cache directory only costs recompilation (`write_failures`)."""
        if self.folder.write(key.digest(), blob):
            self.folder.evict(MAX_ENTRIES)
        else:
            self.write_failures += 1

    def create_pipeline(self, tracker: ObjectTracker, device, key: PipelineKey, create_info):
        """vkCreateComputePipelines through a VkPipelineCache seeded from disk; stores the blob after a miss."""
        initial = self.load(key)
        seed = vk.ffi.from_buffer(initial) if initial else None
        cache_info = vk.VkPipelineCacheCreateInfo(initialDataSize=len(initial) if initial else 0, pInitialData=seed)
        cache = vk.vkCreatePipelineCache(device, cache_info, None)
        token = tracker.add("VkPipelineCache", lambda: vk.vkDestroyPipelineCache(device, cache, None))
        try:
            pipeline = vk.vkCreateComputePipelines(device, cache, 1, [create_info], None)[0]
            if initial is None:
                self.store(key, _cache_data(device, cache))
        finally:
            tracker.release(token)
        return pipeline


def _cache_data(device, cache) -> bytes:
    size = vk.ffi.new("size_t*")
    check(vk, vk.lib.vkGetPipelineCacheData(device, cache, size, vk.ffi.NULL), "vkGetPipelineCacheData")
    data = vk.ffi.new("char[]", size[0])
    check(vk, vk.lib.vkGetPipelineCacheData(device, cache, size, data), "vkGetPipelineCacheData")
    return vk.ffi.buffer(data, size[0])[:]

