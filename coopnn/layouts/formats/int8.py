"""int8: 8-bit integer weights, symmetric, with float32 row scales; each Linear's input quantized to 8-bit integers
in the shader with a scale measured on calibration data (`coopnn.load(..., weights="int8", calibration=x)`), 32-bit
integer sums and bias, and float32 dequantization scales: the arithmetic of `coopnn.layouts.formats.integer`.
Constant vectors other than biases are stored as float32, as the operators that read them compute in float32.

The H100 driver lists the cooperative-vector combinations `s8/s8/s8/s32/s32`, `f32/s8/s8/s32/s32` and
`u32/s8packed/s8/s32/s32` (input, its interpretation, matrix, bias, result): all take 8-bit integer matrices with a
32-bit integer bias and result and no zero points, hence symmetric scales and an integer bias. Elements stop at
+-127, not -128, so that a quantized value's negation is one too and both signs saturate alike.
"""

from __future__ import annotations

import numpy as np

from coopnn.layouts.formats.format import InputQuantization, RowScales, WeightFormat
from coopnn.layouts.formats.fp32 import FORMAT as FP32

LARGEST = 127


def encode(values: np.ndarray) -> np.ndarray:
    """float32 values rounded half to even to integers, clamped to [-127, 127]; NaN gives 0."""
    x = np.asarray(values, np.float32)
    return np.clip(np.rint(np.where(np.isnan(x), np.float32(0), x)), -LARGEST, LARGEST).astype(np.int8)


def decode(stored: np.ndarray) -> np.ndarray:
    return np.asarray(stored, np.int8).astype(np.float32)


# 8-bit elements are read by the portable shader as bytes of 32-bit words, which needs no device feature
FORMAT = WeightFormat("int8", "int8", "8-bit integer weights with float32 row scales, inputs quantized per Linear "
                      "from calibration data, 32-bit integer sums", np.dtype(np.int8), 8, "SINT8", frozenset(),
                      encode, decode, RowScales(float(LARGEST), np.dtype(np.float32)), FP32,
                      InputQuantization(float(LARGEST)))
