"""The array files of `coopnn run`: inputs read from .npy / .npz without unpickling (an .npy memory-mapped, so a file
larger than memory can be streamed), outputs written piece by piece (`OutputFile`: a chunk of rows at a time) to
exactly the file named, through a temporary file and a rename. Pages of mapped files leave the process's resident
memory once used (`release`)."""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from coopnn.disk_cache import TEMPORARY_PREFIX, atomic_path
from coopnn.errors import CoopnnError, InputError

Arrays = np.ndarray | dict[str, np.ndarray]


def _split(spec: str) -> tuple[str, str | None]:
    """`FILE` or `FILE.npz:NAME` as (file, array name or None); a file whose own name holds ':' is taken whole."""
    path, colon, name = spec.rpartition(":")
    if not colon or os.path.exists(spec) or not os.path.exists(path):
        return spec, None
    return path, name


def read_inputs(spec: str, mapped: bool = False) -> Arrays:
    """The array of an .npy file (memory-mapped read-only when `mapped`), or the arrays of an .npz file by name (only
    NAME's for `FILE.npz:NAME`); InputError naming the file when it is not one of numbers (object arrays and pickles
    are never loaded)."""
    path, name = _split(spec)
    try:
        data = np.load(path, mmap_mode="r" if mapped else None, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            if name is not None:
                raise InputError(f"{path!r} is an .npy file of one array: only an .npz file has arrays to name")
            return data
        with data:
            if name is not None and name not in data.files:
                raise InputError(f"{path!r} has no array {name!r}; its arrays: {', '.join(data.files)}")
            return data[name] if name is not None else {k: data[k] for k in data.files}
    except (ValueError, EOFError, zipfile.BadZipFile):
        # numpy's own message advises allow_pickle=True, which would run code from an untrusted file
        raise InputError(f"cannot read input file {path!r}: it is not an .npy or .npz file of numbers (object "
                         "arrays and pickled data are not accepted)") from None
    except OSError as e:
        raise InputError(f"cannot read input file {path!r}: {e.strerror or e}") from None


def match_inputs(arrays: Arrays, names: Sequence[str], spec: str) -> Arrays:
    """`arrays` as the feeds of a model with inputs `names`: an .npz keyed by them, or, for one input, the one array
    given; InputError listing both sides when the file does not say which array is which input."""
    if not isinstance(arrays, dict):
        if len(names) == 1:
            return arrays
        raise InputError(f"the model has several inputs ({', '.join(names)}): give an .npz keyed by input name")
    if set(arrays) == set(names):
        return arrays
    if len(names) == 1 and len(arrays) == 1:
        return next(iter(arrays.values()))
    hint = f"name one with --input {spec}:NAME" if len(names) == 1 else "key the .npz by input name"
    raise InputError(f"{spec!r} holds arrays {', '.join(arrays)}; the model's inputs are {', '.join(names)}: {hint}")


def release(array: np.ndarray) -> None:
    """Drop the pages of a memory-mapped array from this process's resident memory (a no-op for other arrays):
    otherwise every page of a file streamed through stays resident. Touched again, they are read back from the file;
    written ones are kept by the kernel and reach the file as with munmap."""
    mapping = getattr(array, "_mmap", None)
    if mapping is not None:
        mapping.madvise(mmap.MADV_DONTNEED)


class OutputFile:
    """An output file written a chunk of rows at a time: `write(start, outputs)` with the outputs of rows from
    `start`, keyed as `shapes`. Each suffix is a subclass (`WRITERS`); use it in a `with` on a temporary file."""

    several = False  # whether the file holds several outputs

    def __init__(self, path: Path, rows: int, shapes: Mapping[str, tuple[int, ...]],
                 dtypes: Mapping[str, np.dtype]):
        self.path, self.rows, self.shapes, self.dtypes = path, rows, dict(shapes), dict(dtypes)

    def write(self, start: int, outputs: Mapping[str, np.ndarray]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Finish the file (after the last chunk)."""

    def discard(self) -> None:
        """Drop what was made (the run failed); the caller removes the file itself."""

    def __enter__(self) -> "OutputFile":
        return self

    def __exit__(self, kind, *exc) -> None:
        if kind is None:
            self.close()
        else:
            self.discard()


class NpyFile(OutputFile):
    """One output as .npy: the whole array mapped from the file, each chunk written into it."""

    def __init__(self, path, rows, shapes, dtypes):
        super().__init__(path, rows, shapes, dtypes)
        (key,) = self.shapes
        self.array = np.lib.format.open_memmap(path, "w+", self.dtypes[key], (rows,) + self.shapes[key])

    def write(self, start, outputs):
        (values,) = outputs.values()
        self.array[start:start + len(values)] = values
        release(self.array)

    def close(self):
        self.array.flush()
        self.discard()

    def discard(self):
        self.array = None  # unmaps the file


class NpzFile(OutputFile):
    """Outputs keyed by name in an uncompressed .npz, as `np.savez` writes it: each output first written as an .npy
    file in a temporary folder beside it, then copied into the archive."""

    several = True

    def __init__(self, path, rows, shapes, dtypes):
        super().__init__(path, rows, shapes, dtypes)
        self.folder = tempfile.TemporaryDirectory(dir=path.parent, prefix=TEMPORARY_PREFIX)
        self.parts = {key: NpyFile(Path(self.folder.name) / f"{i}.npy", rows, {key: shape}, dtypes)
                      for i, (key, shape) in enumerate(self.shapes.items())}

    def write(self, start, outputs):
        for key, values in outputs.items():
            self.parts[key].write(start, {key: values})

    def close(self):
        for part in self.parts.values():
            part.close()
        with zipfile.ZipFile(self.path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for key, part in self.parts.items():
                archive.write(part.path, f"{key}.npy")
        self.folder.cleanup()

    def discard(self):
        for part in self.parts.values():
            part.discard()
        self.folder.cleanup()


class TextFile(OutputFile):
    """One output of at most two dimensions as rows of text, separated by `delimiter`."""

    delimiter = " "

    def __init__(self, path, rows, shapes, dtypes):
        super().__init__(path, rows, shapes, dtypes)
        (shape,) = self.shapes.values()
        if len(shape) > 1:
            raise CoopnnError(f"cannot write an output of shape {[rows, *shape]} as rows of text to "
                              f"{str(path)!r}: write .npy or .npz")
        self.file = open(path, "w")

    def write(self, start, outputs):
        (values,) = outputs.values()
        np.savetxt(self.file, values, delimiter=self.delimiter)

    def close(self):
        self.file.close()

    def discard(self):
        self.file.close()


class CsvFile(TextFile):
    delimiter = ","


WRITERS: dict[str, type[OutputFile]] = {".npy": NpyFile, ".npz": NpzFile, ".txt": TextFile, ".csv": CsvFile}
OUTPUT_SUFFIXES = tuple(WRITERS)


def output_suffix(path: str) -> str:
    """The suffix of `path` when an `OutputFile` can write it; CoopnnError listing those it can otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise CoopnnError(f"cannot write {path!r}: give an output file ending in {', '.join(OUTPUT_SUFFIXES)}")
    return suffix


@contextlib.contextmanager
def output_file(path: str, rows: int, shapes: Mapping[str, tuple[int, ...]], dtypes: Mapping[str, np.dtype]):
    """The `OutputFile` writing exactly `path` (renamed there once the block ends, nothing left when it raises), for
    outputs keyed and shaped as `shapes` (features, without the `rows`); CoopnnError naming the file when it cannot
    be written or does not hold several outputs."""
    writer = WRITERS[output_suffix(path)]
    if len(shapes) > 1 and not writer.several:
        raise CoopnnError(f"the model has several outputs ({', '.join(shapes)}): write them to an .npz file")
    try:
        with atomic_path(Path(path), make_folder=False) as temporary, writer(temporary, rows, shapes, dtypes) as out:
            yield out
    except OSError as e:
        raise CoopnnError(f"cannot write {path!r}: {e.strerror or e}") from None
