"""What coopnn's on-disk caches share (`layouts/weight_cache`, `runtime/vk/pipeline_cache`): where they live, how an
entry file is framed, and writes that no reader sees half done.

The root is `$COOPNN_CACHE_DIR`, else `$XDG_CACHE_HOME/coopnn`, else `~/.cache/coopnn`; each cache has a folder below
it. An entry file is a header (magic, format version, payload length, SHA-256 of the payload) and the payload, so a
truncated, corrupt or foreign file is recognised and read as a miss. Entries are written to a temporary file in their
own folder and renamed over the old one, which is atomic also between processes: concurrent writers of one entry
leave one whole file, and a reader sees the old file or the new one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

CACHE_DIR_ENV = "COOPNN_CACHE_DIR"
HEADER = struct.Struct("<8sIQ32s")  # magic, format version, payload length, sha256 of the payload
# Temporary files never end in an entry's suffix, so a cache listing its entries does not see them.
TEMPORARY_PREFIX = ".tmp-"


def cache_dir(name: str) -> Path:
    """The folder of the cache `name` (it may not exist yet)."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]) / name
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "coopnn" / name


@dataclass(frozen=True)
class EntryFormat:
    """The framing of one cache's entries; a new `version` makes the files of older ones misses."""

    magic: bytes  # eight bytes naming the cache
    version: int

    def pack(self, payload: bytes) -> bytes:
        return HEADER.pack(self.magic, self.version, len(payload), hashlib.sha256(payload).digest()) + payload

    def unpack(self, raw: bytes) -> bytes | None:
        """The payload of an entry file's bytes, or None when they are not a whole, intact entry of this format."""
        if len(raw) < HEADER.size:
            return None
        magic, version, length, digest = HEADER.unpack_from(raw)
        payload = raw[HEADER.size:]
        if (magic != self.magic or version != self.version or length != len(payload)
                or hashlib.sha256(payload).digest() != digest):
            return None
        return payload


def read_file(path: Path) -> bytes | None:
    """The bytes of `path`, or None when there is no file to read (another process may delete it at any time)."""
    try:
        return path.read_bytes()
    except OSError:
        return None


def write_atomic(path: Path, data: bytes) -> None:
    """Make `data` the contents of `path`, creating its folder; OSError when that cannot be done, and then no
    temporary file is left and an older file at `path` is untouched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=TEMPORARY_PREFIX)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
