"""The array files of `coopnn run`: inputs read from .npy / .npz without unpickling, outputs written to exactly the
file named, through a temporary file and a rename."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from coopnn.disk_cache import write_atomic
from coopnn.errors import CoopnnError, InputError

OUTPUT_SUFFIXES = (".npy", ".npz", ".txt", ".csv")

Arrays = np.ndarray | dict[str, np.ndarray]


def _split(spec: str) -> tuple[str, str | None]:
    """`FILE` or `FILE.npz:NAME` as (file, array name or None); a file whose own name holds ':' is taken whole."""
    path, colon, name = spec.rpartition(":")
    if not colon or os.path.exists(spec) or not os.path.exists(path):
        return spec, None
    return path, name


def read_inputs(spec: str) -> Arrays:
    """The array of an .npy file, or the arrays of an .npz file by name (only NAME's for `FILE.npz:NAME`);
    InputError naming the file when it is not one of numbers (object arrays and pickles are never loaded)."""
    path, name = _split(spec)
    try:
        data = np.load(path, allow_pickle=False)
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


def output_suffix(path: str) -> str:
    """The suffix of `path` when `write_outputs` can write it; CoopnnError listing those it can otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise CoopnnError(f"cannot write {path!r}: give an output file ending in {', '.join(OUTPUT_SUFFIXES)}")
    return suffix


def write_outputs(path: str, outputs: np.ndarray | Mapping[str, np.ndarray]) -> None:
    """Write exactly `path` (through a temporary file and a rename): .npz keyed by output name, or one output as
    .npy, or as rows of text (.txt separated by spaces, .csv by commas) when it has at most two dimensions."""
    suffix = output_suffix(path)
    if isinstance(outputs, Mapping) and suffix != ".npz":
        if len(outputs) != 1:
            raise CoopnnError(f"the model has several outputs ({', '.join(outputs)}): write them to an .npz file")
        outputs = next(iter(outputs.values()))
    data = io.BytesIO()
    if suffix == ".npz":
        np.savez(data, **(outputs if isinstance(outputs, Mapping) else {"output": outputs}))
    elif suffix == ".npy":
        np.save(data, outputs)
    elif outputs.ndim > 2:
        raise CoopnnError(f"cannot write an output of shape {list(outputs.shape)} as rows of text to {path!r}: "
                          "write .npy or .npz")
    else:
        np.savetxt(data, outputs, delimiter="," if suffix == ".csv" else " ")
    try:
        write_atomic(Path(path), data.getvalue(), make_folder=False)
    except OSError as e:
        raise CoopnnError(f"cannot write {path!r}: {e.strerror or e}") from None
