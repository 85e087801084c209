"""int8: elements rounded half to even and clamped to [-127, 127] (NaN to 0), float32 row scales that store each
row's largest |weight| at most 127 (at 127 up to the scale's rounding), float32 constant vectors, an input scale per
Linear."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.layouts.formats import weight_format

INT8 = weight_format("int8")


def test_elements_round_half_to_even_and_saturate_at_127_both_ways():
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.4, 127.6, 1e9, -127.6, -1e9, np.inf, -np.inf, np.nan,
                       -0.0, 3.49999], np.float32)
    got = INT8.encode(values)
    assert got.dtype == np.int8 and INT8.storage == np.int8 and INT8.bits == 8
    assert got.tolist() == [0, 2, 2, 0, -2, -2, 126, 127, 127, 127, -127, -127, 127, -127, 0, 0, 3]
    codes = np.arange(-127, 128, dtype=np.int8)
    np.testing.assert_array_equal(INT8.encode(INT8.decode(codes)), codes)
    assert INT8.decode(np.array([-128], np.int8))[0] == -128  # never written, but decoded as what it is


def test_row_scales_are_float32_and_store_each_rows_largest_weight_at_127_without_saturating():
    rng = np.random.default_rng(1)
    matrix = (rng.normal(size=(40, 9)) * np.logspace(-30, 30, 40)[:, None]).astype(np.float32)
    matrix[3] = 0
    elements, scales = INT8.stored(matrix, "matrix")
    assert scales.dtype == np.float32 and elements.dtype == np.int8
    assert scales[3] == 1 and not elements[3].any()
    top = np.abs(matrix).max(axis=1).astype(np.float64)
    rows = top > 0
    assert np.all(top[rows] / scales[rows] <= 127)
    smaller = np.nextafter(scales[rows], np.float32(0)).astype(np.float64)
    assert np.all(top[rows] / smaller > 127)  # the smallest float32 that keeps the row within 127
    assert np.all(np.abs(elements[rows]).max(axis=1) == 127)
    np.testing.assert_array_equal(elements, INT8.encode(matrix / scales[:, None]))


def test_vectors_other_than_biases_are_stored_as_float32():
    stored, scales = INT8.stored(np.array([1 / 3, -1e-30], np.float32), "vector")
    assert stored.dtype == np.float32 and scales is None and INT8.vectors.name == "fp32"


def test_the_input_scale_stores_the_largest_value_at_127():
    rule = INT8.input_quantization
    for largest in (1.0, 0.3, 12345.678, 1e-30):
        scale = np.float32(rule.scale(largest))
        assert largest / np.float64(scale) <= 127 < largest / np.float64(np.nextafter(scale, np.float32(0)))
    assert rule.scale(0.0) == 1.0
    assert rule.scale(1e-44) == np.finfo(np.float32).tiny  # its reciprocal stays finite
    assert np.isfinite(np.float32(1) / np.float32(rule.scale(1e-44)))


def test_a_calibrated_format_is_still_the_format():
    calibrated = INT8.calibrated({"fc": 0.5})
    assert calibrated == INT8 and hash(calibrated) == hash(INT8) and calibrated.input_scale("fc") == 0.5
    assert INT8.input_scales is None
