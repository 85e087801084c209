"""An on-disk cache of packed weight buffers with their manifests, for layouts only a driver can produce.

One file per key (the caller's: a hash of the weights, the layout, the device and the driver version) under
`coopnn.disk_cache`'s root, framed and written by that module; its payload is a JSON manifest (the key and the entries)
and the buffer. A file that is not a whole, intact entry for its key is deleted and treated as a miss. The cache
keeps the `max_entries` most recently used files: a model being trained gets new weights at every evaluation, and the
cache must not grow with the number of steps.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
from dataclasses import asdict
from pathlib import Path

from coopnn.disk_cache import EntryFormat, read_file, write_atomic
from coopnn.layouts.pack import Entry, WeightImage

FORMAT = EntryFormat(b"COOPNNPW", 2)
MANIFEST_LENGTH = struct.Struct("<Q")
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
        raw = read_file(path)
        packed = None if raw is None else _parse(FORMAT.unpack(raw), key)
        if packed is None:
            self.misses += 1
            path.unlink(missing_ok=True)
            return None
        self.hits += 1
        with contextlib.suppress(OSError):
            os.utime(path)  # recency for eviction
        return packed

    def put(self, key: str, packed: WeightImage) -> None:
        manifest = json.dumps({"key": key, "entries": [asdict(e) for e in packed.entries.values()]}).encode()
        write_atomic(self.path(key), FORMAT.pack(MANIFEST_LENGTH.pack(len(manifest)) + manifest + packed.data))
        self._evict()

    def _evict(self) -> None:
        """Delete the least recently used files beyond `max_entries` (another process may delete them first)."""
        files = []
        for path in self.root.glob("*.bin"):
            with contextlib.suppress(OSError):
                files.append((path.stat().st_mtime_ns, path))
        for _, path in sorted(files)[:max(0, len(files) - self.max_entries)]:
            path.unlink(missing_ok=True)


def _parse(payload: bytes | None, key: str) -> WeightImage | None:
    if payload is None:
        return None
    (length,) = MANIFEST_LENGTH.unpack_from(payload)
    manifest = json.loads(payload[MANIFEST_LENGTH.size:MANIFEST_LENGTH.size + length])
    if manifest["key"] != key:
        return None
    entries = {e["name"]: Entry(**{**e, "shape": tuple(e["shape"])}) for e in manifest["entries"]}
    return WeightImage(payload[MANIFEST_LENGTH.size + length:], entries)
