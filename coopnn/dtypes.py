"""One table of the element types coopnn knows: names, numpy types, sizes, and which backends compute in them."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    numpy: np.dtype
    bits: int
    is_float: bool

    @property
    def itemsize(self) -> int:
        return self.bits // 8


_TABLE = (
    DType("f32", np.dtype(np.float32), 32, True),
    DType("f16", np.dtype(np.float16), 16, True),
    DType("bf16", np.dtype(ml_dtypes.bfloat16), 16, True),
    DType("fp8_e4m3", np.dtype(ml_dtypes.float8_e4m3fn), 8, True),
    DType("fp8_e5m2", np.dtype(ml_dtypes.float8_e5m2), 8, True),
    DType("i8", np.dtype(np.int8), 8, False),
    DType("i32", np.dtype(np.int32), 32, False),
    DType("i64", np.dtype(np.int64), 64, False),
    DType("bool", np.dtype(np.bool_), 8, False),
)

BY_NAME: dict[str, DType] = {d.name: d for d in _TABLE}

F32 = BY_NAME["f32"]
F16 = BY_NAME["f16"]
BOOL = BY_NAME["bool"]

# Input arrays a model accepts; they are computed in float32 whatever they arrive as.
ACCEPTED_INPUT_NUMPY = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def dtype(name: str) -> DType:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(BY_NAME)}") from None
