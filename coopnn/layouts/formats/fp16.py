"""fp16: 16-bit float weights (IEEE half precision, round to nearest even), read by shaders through 16-bit storage
access and widened or multiplied as Float16."""

from __future__ import annotations

import numpy as np

from coopnn.layouts.formats.format import float_format

FORMAT = float_format("fp16", "float16", "16-bit float weights (round to nearest even)", np.float16, "FLOAT16",
                      frozenset({"storageBuffer16BitAccess", "shaderFloat16"}))


def round_fp16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest float16 (ties to even, beyond its range to inf), as float32."""
    return FORMAT.emulate(x)
