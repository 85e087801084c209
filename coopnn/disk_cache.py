"""What coopnn's on-disk caches share (`layouts/weight_cache`, `runtime/vk/pipeline_cache`): where they live, how an
entry file is framed, and writes that no reader sees half done (`write_atomic`, which every file coopnn writes goes
through: models, parameter files, checkpoints, cache entries).

The root is `$COOPNN_CACHE_DIR`, else `$XDG_CACHE_HOME/coopnn`, else `~/.cache/coopnn`; each cache has a folder below
it. An entry file is a header (magic, format version, payload length, SHA-256 of the payload) and the payload, so a
truncated, corrupt or foreign file is recognised and read as a miss. Entries are written to a temporary file in their
own folder and renamed over the old one (`atomic_path` for a file written piece by piece), which is atomic also
between processes: concurrent writers of one entry leave one whole file, and a reader sees the old file or the new
one. A written file ends with the permissions a plain `open(path, "w")` would give it: a new file those the umask
leaves of 0666, a file that existed its own mode; a symbolic link is followed, so its target is written and the link
stays; a folder is refused (IsADirectoryError) before anything is written.

`CacheFolder` is one cache's folder as the caches use it: a damaged entry is deleted (the caller rebuilds it) and a
folder that cannot be written turns writing off for the process, each with one `CacheWarning`; `evict` keeps a cache
to its most recently used entries, so no cache grows without bound.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
import struct
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from coopnn.errors import InputError

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


def write_atomic(path: Path, data: bytes, make_folder: bool = True) -> None:
    """Make `data` the contents of `path` (creating its folder unless `make_folder` is False); OSError when that
    cannot be done, and then no temporary file is left and an older file at `path` is untouched. A process killed
    mid-write leaves the older file too (and a temporary file beside it)."""
    with atomic_path(Path(path), make_folder) as temporary:
        temporary.write_bytes(data)


@contextlib.contextmanager
def atomic_path(path: Path, make_folder: bool = True) -> Iterator[Path]:
    """A new empty temporary file beside the file `path` names (the target of a symbolic link) for the block to write
    (of any size, by any means), renamed over that file when the block ends, and removed instead when it raises; as
    `write_atomic` otherwise."""
    target = written_file(Path(path))
    if make_folder:
        target.parent.mkdir(parents=True, exist_ok=True)
    temporary = _new_temporary(target)
    try:
        yield temporary
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def written_file(path: Path) -> Path:
    """The file a write to `path` changes: `path`, or the file its symbolic links end at (which may not exist yet),
    so that the rename replaces that file and never the link; IsADirectoryError when it is a folder."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder, not a file", os.fspath(path))
    return target


def refuse_folder(path: str | os.PathLike, what: str) -> None:
    """InputError naming `path` when it is a folder (or a link to one), before anything is written: `what` (a
    "checkpoint", a "model") is written to a file."""
    if Path(path).is_dir():
        raise InputError(f"cannot write the {what} to {os.fspath(path)!r}: it is a folder; give the path of a file "
                         f"in it")


def _new_temporary(target: Path) -> Path:
    """An empty file beside `target` with the mode `target` has, or for a new file the mode the kernel gives one
    made with 0666 under the process's umask (and the folder's default ACL), read without changing the umask."""
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None
    while True:
        temporary = target.parent / f"{TEMPORARY_PREFIX}{secrets.token_hex(8)}"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        if mode is not None:
            try:
                os.chmod(temporary, mode)
            except BaseException:
                os.unlink(temporary)
                raise
        return temporary


class CacheWarning(UserWarning):
    """A cache could not be used as it should (a damaged entry, a folder that cannot be written); coopnn goes on."""


_warned: set = set()
_warned_lock = threading.Lock()


def _warn_once(topic, message: str) -> None:
    with _warned_lock:
        if topic in _warned:
            return
        _warned.add(topic)
    warnings.warn(message, CacheWarning, stacklevel=4)


class CacheFolder:
    """The folder `root` of the cache `name` (what warnings call it), holding entries of `fmt` named `<key>.bin`."""

    _unwritable: set[Path] = set()  # folders found unwritable in this process: writing is off for them

    def __init__(self, name: str, root: Path, fmt: EntryFormat):
        self.name, self.root, self.format = name, Path(root), fmt

    def path(self, key: str) -> Path:
        return self.root / f"{key}.bin"

    def read(self, key: str) -> bytes | None:
        """The payload of entry `key`, or None on a miss; a damaged entry is deleted, with one warning."""
        path = self.path(key)
        raw = read_file(path)
        if raw is None:
            return None
        payload = self.format.unpack(raw)
        if payload is None:
            with contextlib.suppress(OSError):
                path.unlink()
            _warn_once(("damaged", self.root), f"coopnn's {self.name} cache held a damaged or foreign entry "
                                               f"({path}); it was deleted and is rebuilt")
        return payload

    def write(self, key: str, payload: bytes) -> bool:
        """Store entry `key`; False when the folder cannot be written (writing is then off for this process, with
        one warning)."""
        if self.root in self._unwritable:
            return False
        try:
            write_atomic(self.path(key), self.format.pack(payload))
            return True
        except OSError as e:
            self._unwritable.add(self.root)
            _warn_once(("unwritable", self.root),
                       f"coopnn cannot write its {self.name} cache in {self.root} ({e.strerror or e}); it runs "
                       f"without storing them in this process (set {CACHE_DIR_ENV} to a writable folder)")
            return False

    def touch(self, key: str) -> None:
        """Mark entry `key` as just used (for `evict`)."""
        with contextlib.suppress(OSError):
            os.utime(self.path(key))

    def evict(self, max_entries: int) -> None:
        """Delete the least recently used entries beyond `max_entries` (another process may delete them first)."""
        files = []
        for path in self.root.glob("*.bin"):
            with contextlib.suppress(OSError):
                files.append((path.stat().st_mtime_ns, path))
        for _, path in sorted(files)[:max(0, len(files) - max_entries)]:
            with contextlib.suppress(OSError):
                path.unlink()
