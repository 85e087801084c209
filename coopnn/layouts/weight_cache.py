"""An on-disk cache of packed weight buffers with their manifests, for layouts only a driver can produce.

One file per key (the caller's: a hash of the weights, the layout, the device and the driver version) under
`coopnn.disk_cache`'s root, framed, written and kept bounded by that module (`CacheFolder`); its payload is a JSON
manifest (the key and the entries) and the buffer. A file that is not a whole, intact entry for its key is deleted
and treated as a miss. The cache keeps the `max_entries` most recently used files: a model being trained gets new
weights at every evaluation, and the cache must not grow with the number of steps. A folder that cannot be written
only costs the conversions a cache would have saved.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import asdict
from pathlib import Path

from coopnn.disk_cache import CacheFolder, EntryFormat
from coopnn.layouts.pack import Entry, WeightImage

FORMAT = EntryFormat(b"COOPNNPW", 2)
MANIFEST_LENGTH = struct.Struct("<Q")
MAX_ENTRIES = 64


class WeightImageCache:
    """`get(key)` / `put(key, packed)` under `root`; `hits` and `misses` count lookups."""

    def __init__(self, root: Path, max_entries: int = MAX_ENTRIES):
        self.folder = CacheFolder("converted-weights", root, FORMAT)
        self.root = self.folder.root
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def path(self, key: str) -> Path:
        return self.folder.path(_name(key))

    def get(self, key: str) -> WeightImage | None:
        payload = self.folder.read(_name(key))
        packed = None if payload is None else _parse(payload, key)
        if packed is None:
            self.misses += 1
            return None
        self.hits += 1
        self.folder.touch(_name(key))  # recency for eviction
        return packed

    def put(self, key: str, packed: WeightImage) -> None:
        manifest = json.dumps({"key": key, "entries": [asdict(e) for e in packed.entries.values()]}).encode()
        if self.folder.write(_name(key), MANIFEST_LENGTH.pack(len(manifest)) + manifest + packed.data):
            self.folder.evict(self.max_entries)


def _name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _parse(payload: bytes, key: str) -> WeightImage | None:
    """The image an intact entry holds for `key`; None for another key's entry or a manifest this version cannot
    read (the checksum passed, so it was written whole, but by other code)."""
    try:
        (length,) = MANIFEST_LENGTH.unpack_from(payload)
        manifest = json.loads(payload[MANIFEST_LENGTH.size:MANIFEST_LENGTH.size + length])
        if manifest["key"] != key:
            return None
        entries = {e["name"]: Entry(**{**e, "shape": tuple(e["shape"])}) for e in manifest["entries"]}
    except (struct.error, ValueError, KeyError, TypeError):
        return None
    return WeightImage(payload[MANIFEST_LENGTH.size + length:], entries)
