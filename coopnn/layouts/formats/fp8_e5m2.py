"""fp8_e5m2: 8-bit float weights with 5 exponent and 2 mantissa bits (IEEE-like: infinities, NaNs, largest finite
57344; ml_dtypes' float8_e5m2, SPIR-V's FloatE5M2NV), scaled per output row so each row's largest |weight| is stored
as 448, not 57344: the product of the stored elements is rounded to float16 (largest 65504) before the scale applies,
and a row whose largest weight is 57344 overflows it for any input above 1.15 (every zoo model gave infinities).
At 448, as fp8_e4m3, the product has the same margin, and E5M2 still keeps weights down to 2^-14 / 448 (about 2^-23)
of the row's largest in its normal range (E4M3: 2^-6 / 448, about 2^-15), so the smaller maximum costs no precision."""

from __future__ import annotations

import ml_dtypes

from coopnn.layouts.formats.fp8 import fp8_format

FORMAT = fp8_format("fp8_e5m2", "float8 E5M2", "8-bit float weights (E5M2) with float16 row scales",
                    ml_dtypes.float8_e5m2, "FLOAT8_E5M2", largest=448.0)
