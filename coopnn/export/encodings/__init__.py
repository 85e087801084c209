"""How an `Op.ENCODING` node's encoding becomes scalar statements: one module per encoding in this package, each
defining `LOWERINGS` (tiny-cuda-nn otype -> lowering), found here; adding an encoding to the export is adding a module.

A lowering takes the encoding, the expressions of its input columns, its parameters (a numpy vector, empty for
encodings without any) and the program, and returns the expressions of its output columns, padding included; an
encoding with parameters puts them in a table of the weights file (`ScalarProgram.table`). An encoding without a
module here is refused naming the node.
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping, Sequence

import numpy as np

from coopnn.errors import CompileError
from coopnn.export.scalar import ScalarProgram
from coopnn.registry import package_tables

EncodingLowering = Callable[..., list[str]]


@functools.cache
def encoding_lowerings() -> Mapping[str, EncodingLowering]:
    return package_tables(__name__, "LOWERINGS",
                          lambda module, twice: f"{module} lowers the encodings {sorted(twice)} again")


def lower_encoding(encoding, columns: Sequence[str], params: np.ndarray, program: ScalarProgram,
                   what: str) -> list[str]:
    """The output expressions of `encoding` on `columns`; CompileError naming `what` for one the export cannot
    write."""
    lower = encoding_lowerings().get(encoding.otype)
    if lower is None:
        raise CompileError(f"{what}: {encoding.describe()} has no lowering in the shader export; it writes "
                           f"{', '.join(sorted(encoding_lowerings()))} encodings")
    return lower(encoding, list(columns), params, program, what)
