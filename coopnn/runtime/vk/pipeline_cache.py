"""The on-disk pipeline cache: one file per (device, driver) and pipeline, so a second run skips shader compilation.

Files live under `<root>/<device uuid>-<driver version>-<pipeline cache uuid>/<sha256 of the pipeline>.bin`, where the
pipeline hash covers the SPIR-V, entry point, specialization constants and layout. `root` is `$COOPNN_CACHE_DIR/
pipelines`, else `$XDG_CACHE_HOME/coopnn/pipelines`, else `~/.cache/coopnn/pipelines`. Each file carries a header and
a SHA-256 of the driver's blob; a file that fails the check is deleted and counted in `discarded`, so a corrupt or
truncated file costs one recompilation, never a driver fed garbage. Writes go to a temporary file renamed into place,
so concurrent processes never see half a file.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from coopnn.runtime.vk.device_info import DeviceInfo
from coopnn.runtime.vk.loader import check, load_vulkan
from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()

CACHE_DIR_ENV = "COOPNN_CACHE_DIR"
MAGIC = b"COOPNNPC"
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sIQ32s")  # magic, format version, blob length, sha256 of blob


def default_cache_root() -> Path:
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]) / "pipelines"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "coopnn" / "pipelines"


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
        self.directory = (root or default_cache_root()) / device_key(info)
        self.hits = 0
        self.misses = 0
        self.discarded = 0
        self.write_failures = 0

    def path(self, key: PipelineKey) -> Path:
        return self.directory / f"{key.digest()}.bin"

    def load(self, key: PipelineKey) -> bytes | None:
        """The stored blob for `key`, or None (a damaged file is deleted)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            self.misses += 1
            return None
        blob = _unpack(data)
        if blob is None:
            self.discarded += 1
            self.misses += 1
            path.unlink(missing_ok=True)
            return None
        self.hits += 1
        return blob

    def store(self, key: PipelineKey, blob: bytes) -> None:
        """Write `blob` atomically; an unwritable cache directory only costs recompilation (`write_failures`)."""
        path = self.path(key)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as out:
                out.write(HEADER.pack(MAGIC, FORMAT_VERSION, len(blob), hashlib.sha256(blob).digest()) + blob)
            os.replace(tmp, path)
        except OSError:
            self.write_failures += 1
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

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


def _unpack(data: bytes) -> bytes | None:
    if len(data) < HEADER.size:
        return None
    magic, version, length, digest = HEADER.unpack_from(data)
    blob = data[HEADER.size:]
    if magic != MAGIC or version != FORMAT_VERSION or length != len(blob) or hashlib.sha256(blob).digest() != digest:
        return None
    return blob
