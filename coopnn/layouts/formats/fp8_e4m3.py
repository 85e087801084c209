"""fp8_e4m3: 8-bit float weights with 4 exponent and 3 mantissa bits, the "fn" variant (no infinities, NaN only at
S.1111.111, largest finite 448), scaled per output row so each row's largest |weight| is stored as 448.

The variant: SPV_NV_cooperative_vector names the interpretation FloatE4M3NV (ComponentType 1000491002;
../shared/spec/SPV_NV_cooperative_vector.txt, line 191) without defining it; Vulkan's 8-bit float types (VK_EXT_shader_float8's proposal:
"E4M3 and E5M2 as defined by the 'FP8 Formats For Deep Learning' whitepaper", arXiv:2209.05433, table 1) and CUDA's
__nv_fp8_e4m3 ("doesn't support Infinity. NaNs are limited to 0x7F and 0xFF") are that variant: ml_dtypes'
float8_e4m3fn, not its float8_e4m3 (IEEE-like, with infinities, largest 240).
"""

from __future__ import annotations

import ml_dtypes

from coopnn.layouts.formats.fp8 import fp8_format

FORMAT = fp8_format("fp8_e4m3", "float8 E4M3", "8-bit float weights (E4M3, no infinities) with float16 row scales",
                    ml_dtypes.float8_e4m3fn, "FLOAT8_E4M3", largest=448.0)
