"""q8_0: GGML's Q8_0 block format (`coopnn.layouts.formats.blocks`): blocks of 32 weights along a row, each a
float16 scale d and 32 int8 codes q, weight = d * q.

The quantizer is GGML's reference, quantize_row_q8_0_ref (ggml-org/llama.cpp, ggml/src/ggml-quants.c), in float32:
amax = the block's largest |weight|, d = amax / 127, id = 1 / d (0 where d is 0), q = roundf(weight * id) (half
away from zero), d stored as float16. A code whose product weight * id is not finite (id infinite: only where d is
below 2^-127, so that the stored float16 scale is 0 and every weight of the block is 0 anyway) is 0, where C leaves
the conversion undefined.
"""

from __future__ import annotations

import numpy as np

from coopnn.layouts.formats.blocks import block_format
from coopnn.layouts.formats.format import Blocks

LARGEST = 127


def quantize(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float32 scale and the int8 codes of each block of 32 float32 weights (the last axis)."""
    amax = np.abs(blocks).max(axis=-1)
    scale = amax / np.float32(LARGEST)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inverse = np.where(scale != 0, np.float32(1) / scale, np.float32(0)).astype(np.float32)
        x = (blocks * inverse[..., None]).astype(np.float64)
    # roundf: half away from zero; x + 1/2 is exact in float64
    rounded = np.trunc(x + np.copysign(0.5, x))
    return scale, np.where(np.isfinite(rounded), rounded, 0).astype(np.int8)


FORMAT = block_format("q8_0", "Q8_0", "GGML Q8_0 blocks: 32 int8 weights sharing a float16 scale, float32 biases",
                      8, "SINT8", Blocks(32, LARGEST, zero=0, signed=True), quantize)
