"""fp32: weights as the model stores them, 32-bit floats; every shader reads them without extra features."""

from __future__ import annotations

import numpy as np

from coopnn.layouts.formats.format import float_format

FORMAT = float_format("fp32", "float32", "32-bit float weights, as the model stores them", np.float32, "FLOAT32")
