"""How an `Op.ENCODING` node's encoding becomes scalar statements: one module per encoding in this package, each
defining `LOWERINGS` (tiny-cuda-nn otype -> lowering), found here; adding an encoding to the export is adding a module.

A lowering takes the encoding, the expressions of its input columns, its parameters (a numpy vector, empty for
encodings without any) and the program, and returns the expressions of its output columns, padding included; an
encoding with parameters puts them in a table of the weights file (`ScalarProgram.table`). An encoding without a
module here is refused naming the node.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import Callable, Mapping, Sequence

import numpy as np

from coopnn.errors import CompileError
from coopnn.export.scalar import ScalarProgram

EncodingLowering = Callable[..., list[str]]


@functools.cache
def encoding_lowerings() -> Mapping[str, EncodingLowering]:
    found: dict[str, EncodingLowering] = {}
    for module in pkgutil.iter_modules(__path__):
        table = getattr(importlib.import_module(f"{__name__}.{module.name}"), "LOWERINGS", {})
        twice = set(found) & set(table)
        if twice:
            raise ValueError(f"{module.name} lowers the encodings {sorted(twice)} again")
        found.update(table)
    return found


def lower_encoding(encoding, columns: Sequence[str], params: np.ndarray, program: ScalarProgram,
                   what: str) -> list[str]:
    """The output expressions of `encoding` on `columns`; CompileError naming `what` for one the export cannot
    write."""
    lower = encoding_lowerings().get(encoding.otype)
    if lower is None:
        raise CompileError(f"{what}: {encoding.describe()} has no lowering in the shader export; it writes "
                           f"{', '.join(sorted(encoding_lowerings()))} encodings")
    return lower(encoding, list(columns), params, program, what)
