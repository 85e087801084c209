"""The block formats (q8_0.py, q4_0.py) share this construction: GGML's layout of a block-quantized matrix, each row
cut into blocks of `Blocks.size` consecutive weights (padded with zeros to whole blocks), each block a float16 scale
d followed by the weights' codes, as llama.cpp stores Q8_0 and Q4_0 tensors (ggml-org/llama.cpp,
ggml/src/ggml-common.h: `block_q8_0 { ggml_half d; int8_t qs[QK8_0]; }` and `block_q4_0 { ggml_half d; uint8_t
qs[QK4_0 / 2]; }`, QK8_0 = QK4_0 = 32, 34 and 18 bytes, no padding). Codes narrower than a byte share bytes as
GGML's dequantize_row_q4_0 (ggml/src/ggml-quants.c) reads them: code j of a block sits in byte j mod (bytes of
codes), in its low bits for the first such run of codes and its high bits for the next. A weight is d * (q - zero)
(`Blocks`), exact in float32 (an 11-bit scale times a code of at most 8 bits), as GGML's dequantization computes it.

Each format's quantizer (its module) gives the float32 scale and the codes of each block; the scale is stored
rounded to float16 (to nearest even, as GGML_FP32_TO_FP16), while the codes are computed from the float32 scale, as
GGML's reference quantizers do.

Biases (and every other constant vector) are float32: llama.cpp's quantizer (src/llama-quant.cpp) quantizes only
tensors of two or more dimensions ("quantize only 2D and 3D tensors"), so a GGUF model's biases stay F32, and this
format's arithmetic is float32 (`coopnn.layouts.formats.emulation.emulate_weights`), which a float32 bias keeps
exact at a cost of 4 bytes per output row.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from coopnn.layouts.formats.format import Blocks, WeightFormat
from coopnn.layouts.formats.fp32 import FORMAT as FP32

# blocks of float32 weights (..., size) -> their float32 scales (...) and integer codes (..., size)
Quantizer = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def block_format(name: str, label: str, description: str, bits: int, component_type: str | None, blocks: Blocks,
                 quantize: Quantizer) -> WeightFormat:
    """A block format of `bits`-wide codes, each block quantized by `quantize`."""
    code_bytes = blocks.size * bits // 8
    runs = 8 // bits  # codes per byte, each run of `code_bytes` codes in its own bits of the bytes
    mask = (1 << bits) - 1
    storage = np.dtype([("d", "<f2"), ("qs", "u1", (code_bytes,))])

    def encode(weights: np.ndarray) -> np.ndarray:
        x = np.asarray(weights, np.float32)
        columns = x.shape[-1]
        padded = np.zeros(x.shape[:-1] + (blocks.count(columns) * blocks.size,), np.float32)
        padded[..., :columns] = x
        grouped = padded.reshape(x.shape[:-1] + (-1, blocks.size))
        scales, codes = quantize(grouped)
        codes = codes.astype(np.int64) & mask  # two's complement for signed codes
        stored = np.empty(grouped.shape[:-1], storage)
        with np.errstate(over="ignore"):  # a scale beyond float16 (refused by `Blocks.check`) becomes infinity
            stored["d"] = scales.astype(np.float16)
        in_runs = codes.reshape(grouped.shape[:-1] + (runs, code_bytes))
        stored["qs"] = sum(in_runs[..., run, :] << (bits * run) for run in range(runs))
        return stored

    def decode(stored: np.ndarray) -> np.ndarray:
        stored = np.asarray(stored, storage)
        raw = stored["qs"].astype(np.int64)
        codes = np.concatenate([(raw >> (bits * run)) & mask for run in range(runs)], axis=-1)
        if blocks.signed:
            codes = np.where(codes > mask >> 1, codes - (1 << bits), codes)
        values = stored["d"].astype(np.float32)[..., None] * (codes - blocks.zero).astype(np.float32)
        return values.reshape(stored.shape[:-1] + (-1,))

    # codes are read by the portable shader as bits of 32-bit words, which needs no device feature
    return WeightFormat(name, label, description, storage, bits, component_type, frozenset(), encode, decode,
                        vector_format=FP32, blocks=blocks)
