"""fp32: the weights as the model stores them, unchanged bit for bit, read by any shader."""

from __future__ import annotations

import numpy as np

from coopnn.layouts.formats.fp32 import FORMAT


def test_weights_are_kept_bit_for_bit():
    w = np.array([1 / 3, -0.0, np.float32(1e-45), np.inf, 3.4e38], np.float32)
    assert FORMAT.encode(w).tobytes() == w.tobytes()
    assert FORMAT.emulate(w).tobytes() == w.tobytes()


def test_any_shader_reads_it():
    assert FORMAT.bits == 32 and FORMAT.storage == np.float32
    assert FORMAT.shader_features == frozenset() and FORMAT.component_type == "FLOAT32"
