"""The 8-bit float weight formats (fp8_e4m3.py, fp8_e5m2.py) share this construction: elements rounded by ml_dtypes
(to nearest even) after saturating to the largest finite value, matrices scaled per output row (`RowScales`) with
float16 scales, and vectors (biases) stored as float16.

Biases are float16, not float32, because the cooperative-vector combinations that read 8-bit float matrices
(`f16/e4m3/e4m3/f16/f16` and `f16/e5m2/e5m2/f16/f16`: input, matrix, its interpretation, bias, result) take a float16
bias and give a float16 result; the numpy oracle and the portable shader add the same float16 bias in the same order
(`coopnn.layouts.formats.emulation`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from coopnn.layouts.formats.format import RowScales, WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16


def fp8_format(name: str, label: str, description: str, dtype, component_type: str, largest: float) -> WeightFormat:
    """An 8-bit float format of the ml_dtypes type `dtype`; a row's largest |weight| is stored as `largest`."""
    storage = np.dtype(dtype)
    top = float(ml_dtypes.finfo(storage).max)

    def encode(weights: np.ndarray) -> np.ndarray:
        # saturate first: ml_dtypes rounds what lies beyond the largest finite value to NaN (E4M3fn, which has no
        # infinity) or infinity (E5M2); the GPU's conversions to these formats saturate (CUDA's __NV_SATFINITE)
        return np.clip(np.asarray(weights, np.float32), -top, top).astype(storage)

    def decode(stored: np.ndarray) -> np.ndarray:
        return np.asarray(stored, storage).astype(np.float32)

    # 8-bit elements are read by the portable shader as bytes of 32-bit words, which needs no device feature
    return WeightFormat(name, label, description, storage, 8, component_type, frozenset(), encode, decode,
                        RowScales(largest), FP16)
