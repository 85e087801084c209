"""q4_0: GGML's Q4_0 block format (`coopnn.layouts.formats.blocks`): blocks of 32 weights along a row, each a
float16 scale d and 16 bytes of 4-bit codes q (weight j in the low nibble of byte j, weight j + 16 in its high
nibble), weight = d * (q - 8).

The quantizer is GGML's reference, quantize_row_q4_0_ref (ggml-org/llama.cpp, ggml/src/ggml-quants.c), in float32:
max = the block's first weight of the largest magnitude, with its sign (+0 for a block of zeros, so that its scale
is -0), d = max / -8, id = 1 / d (0 where d is 0), q = min(15, (int8_t)(weight * id + 8.5f)) (the sum rounded to
float32, then truncated), d stored as float16. The largest-magnitude weight becomes code 0, d * -8 = max; weights of
the other sign reach at most code 15, 7 d. A code whose product weight * id is not finite (id infinite: only where d
is below 2^-127, so that the stored float16 scale is 0 and every weight of the block is 0 anyway) is 8, weight 0,
where C leaves the conversion undefined.
"""

from __future__ import annotations

import numpy as np

from coopnn.layouts.formats.blocks import block_format
from coopnn.layouts.formats.format import Blocks

LARGEST = 8
ZERO = 8


def quantize(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float32 scale and the 4-bit codes of each block of 32 float32 weights (the last axis)."""
    magnitude = np.abs(blocks)
    first = np.take_along_axis(blocks, magnitude.argmax(axis=-1)[..., None], axis=-1)[..., 0]
    top = np.where(magnitude.max(axis=-1) > 0, first, np.float32(0))  # GGML's max starts at +0, kept for zeros
    scale = top / np.float32(-LARGEST)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inverse = np.where(scale != 0, np.float32(1) / scale, np.float32(0)).astype(np.float32)
        shifted = blocks * inverse[..., None] + np.float32(ZERO + 0.5)
    codes = np.where(np.isfinite(shifted), np.minimum(np.trunc(shifted), 15), ZERO)
    return scale, codes.astype(np.uint8)


FORMAT = block_format("q4_0", "Q4_0", "GGML Q4_0 blocks: 32 4-bit weights sharing a float16 scale, float32 biases",
                      4, None, Blocks(32, LARGEST, zero=ZERO, signed=False), quantize)
