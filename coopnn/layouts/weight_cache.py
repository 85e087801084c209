"""An on-disk cache of packed weight buffers with their manifests, for layouts only a driver can produce.

One file per key (the caller's: a hash of the weights, the layout, the device and the driver version), holding a JSON
manifest (the entries, the buffer's SHA-256) and the buffer. A file that does not parse or fails its checksum is
deleted and treated as a miss; writes go to a temporary file renamed into place, so readers never see half a file.
The cache keeps the `max_entries` most recently used files: a model being trained gets new weights at every
evaluation, and the cache must not grow with the number of steps.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import tempfile
from dataclasses import asdict
from pathlib import Path

from coopnn.layouts.pack import Entry, WeightImage

MAGIC = b"COOPNNPW"
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sIQ")  # magic, format version, manifest length
MAX_ENTRIES = 64


class WeightImageCache:
    """`get(key)` / `put(key, packed)` under `root`; `hits` and `misses` count lookups."""

    def __init__(self, root: Path, max_entries: int = MAX_ENTRIES):
        self.root = Path(root)
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def path(self, key: str) -> Path:
        return self.root / f"{hashlib.sha256(key.encode()).hexdigest()}.bin"

    def get(self, key: str) -> WeightImage | None:
        path = self.path(key)
        packed = _read(path, key) if path.exists() else None
        if packed is None:
            self.misses += 1
            path.unlink(missing_ok=True)
            return None
        self.hits += 1
        with contextlib.suppress(OSError):
            os.utime(path)  # recency for eviction
        return packed

    def put(self, key: str, packed: WeightImage) -> None:
        manifest = {"key": key, "sha256": hashlib.sha256(packed.data).hexdigest(),
                    "entries": [asdict(e) for e in packed.entries.values()]}
        text = json.dumps(manifest).encode()
        self.root.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.root, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(HEADER.pack(MAGIC, FORMAT_VERSION, len(text)) + text + packed.data)
            os.replace(temporary, self.path(key))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        self._evict()

    def _evict(self) -> None:
        """Delete the least recently used files beyond `max_entries` (another process may delete them first)."""
        files = []
        for path in self.root.glob("*.bin"):
            with contextlib.suppress(OSError):
                files.append((path.stat().st_mtime_ns, path))
        for _, path in sorted(files)[:max(0, len(files) - self.max_entries)]:
            path.unlink(missing_ok=True)


def _read(path: Path, key: str) -> WeightImage | None:
    raw = path.read_bytes()
    if len(raw) < HEADER.size:
        return None
    magic, version, length = HEADER.unpack_from(raw)
    if magic != MAGIC or version != FORMAT_VERSION:
        return None
    try:
        manifest = json.loads(raw[HEADER.size:HEADER.size + length])
    except ValueError:
        return None
    data = raw[HEADER.size + length:]
    if manifest.get("key") != key or manifest.get("sha256") != hashlib.sha256(data).hexdigest():
        return None
    entries = {e["name"]: Entry(**{**e, "shape": tuple(e["shape"])}) for e in manifest["entries"]}
    return WeightImage(data, entries)
