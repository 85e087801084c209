"""`coopnn run` over inputs of any size in bounded memory: rows go through the model a chunk at a time (at most
CHUNK_ROWS rows and CHUNK_BYTES of float32 inputs and outputs), read from memory-mapped .npy files and written to the
output file as they come (`cli_arrays.OutputFile`), the pages of both released after each chunk. With more than one
chunk, a progress bar on stderr follows the rows (`coopnn.progress`: redrawn on a terminal, ten plain lines in a log).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from coopnn.cli_arrays import output_file, release
from coopnn.errors import InputError
from coopnn.progress import Progress

# A chunk's inputs and outputs stay below CHUNK_BYTES, and its rows below CHUNK_ROWS, which bounds what a backend
# computing layer by layer on the host (numpy) holds for the hidden layers.
CHUNK_ROWS = 1 << 16
CHUNK_BYTES = 32 << 20


def chunk_rows(model) -> int:
    """Rows per chunk for `model` (see CHUNK_ROWS and CHUNK_BYTES)."""
    features = sum(math.prod(t.shape[1:]) for t in (*model.inputs, *model.outputs))
    return max(1, min(CHUNK_ROWS, CHUNK_BYTES // (4 * max(features, 1))))


def run_in_chunks(model, feeds: Mapping[str, np.ndarray], path: str) -> None:
    """Run `model` on `feeds` (arrays keyed by input name, of one number of rows; memory-mapped ones are released
    as they are read) and write its outputs to exactly `path` (`cli_arrays.output_file`)."""
    rows = _rows(feeds)
    step = chunk_rows(model)
    single = len(model.inputs) == 1 and len(model.outputs) == 1
    keys = {"output" if single else t.name: t for t in model.outputs}
    starts = range(0, rows, step) if rows else range(1)
    bar = Progress(rows, label="run") if len(starts) > 1 else None
    try:
        with output_file(path, rows, {k: tuple(t.shape[1:]) for k, t in keys.items()},
                         {k: t.dtype for k, t in keys.items()}) as out:
            for start in starts:
                outputs = model.run({name: array[start:start + step] for name, array in feeds.items()})
                out.write(start, {"output": outputs} if single else outputs)
                for array in feeds.values():
                    release(array)
                if bar is not None:
                    bar.advance(min(step, rows - start))
    finally:
        if bar is not None:
            bar.close()


def _rows(feeds: Mapping[str, np.ndarray]) -> int:
    """The number of rows every input has; InputError naming the shapes otherwise."""
    lengths = {len(a) if a.ndim else None for a in feeds.values()}
    if None in lengths or len(lengths) != 1:
        shapes = ", ".join(f"{name} {list(a.shape)}" for name, a in feeds.items())
        raise InputError(f"the inputs need arrays of [batch, features] with one batch size; given {shapes}")
    return lengths.pop()
