"""fp16: IEEE half precision, rounded to nearest even, beyond its range to infinity, read through 16-bit storage."""

from __future__ import annotations

import warnings

import numpy as np

from coopnn.layouts.formats.fp16 import FORMAT, round_fp16


def test_round_fp16_is_nearest_even():
    assert round_fp16(np.float32(1 + 2 ** -11)) == 1.0  # a tie: to the even neighbour
    assert round_fp16(np.float32(1 + 3 * 2 ** -11)) == 1 + 2 ** -9
    assert round_fp16(np.float32(70000.0)) == np.inf


def test_stored_as_ieee_half_precision_bits():
    stored = FORMAT.encode(np.array([1.0, -2.0, 65504.0, 2.0 ** -24], np.float32))
    assert stored.dtype == np.float16 and FORMAT.bits == 16
    assert stored.view(np.uint16).tolist() == [0x3C00, 0xC000, 0x7BFF, 0x0001]


def test_overflow_rounds_to_infinity_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert FORMAT.emulate(np.array([1e6, -1e6], np.float32)).tolist() == [np.inf, -np.inf]


def test_shaders_read_it_with_16_bit_storage_and_float16():
    assert FORMAT.shader_features == {"storageBuffer16BitAccess", "shaderFloat16"}
    assert FORMAT.component_type == "FLOAT16"
