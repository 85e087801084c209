"""fp8_e4m3 and fp8_e5m2: elements rounded as ml_dtypes rounds (nearest even), saturated to the largest finite
value, the E4M3 "fn" variant (no infinities, 448 largest); float16 row scales chosen so each row's largest |weight| is
stored as 448 without saturating; float16 biases; weights that are not finite refused."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from coopnn.errors import CompileError
from coopnn.layouts.formats import weight_format

FP8 = ["fp8_e4m3", "fp8_e5m2"]
TYPES = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}


def _finite_codes(name):
    values = np.arange(256, dtype=np.uint8).view(TYPES[name]).astype(np.float32)
    return np.arange(256)[np.isfinite(values)], values[np.isfinite(values)]


@pytest.mark.parametrize("name", FP8)
def test_every_finite_code_decodes_as_ml_dtypes_and_encodes_back(name):
    fmt = weight_format(name)
    codes, values = _finite_codes(name)
    assert fmt.storage == np.dtype(TYPES[name]) and fmt.bits == 8
    np.testing.assert_array_equal(fmt.decode(codes.astype(np.uint8).view(fmt.storage)), values)
    stored = fmt.encode(values).view(np.uint8).astype(int)
    zeros = values == 0  # -0.0 keeps its sign bit
    np.testing.assert_array_equal(stored[~zeros], codes[~zeros])


@pytest.mark.parametrize("name", FP8)
def test_rounds_to_nearest_with_ties_to_the_even_code(name):
    fmt = weight_format(name)
    _, values = _finite_codes(name)
    ladder = np.unique(values[values > 0])
    mid = ((ladder[:-1].astype(np.float64) + ladder[1:]) / 2).astype(np.float32)
    got = fmt.encode(mid).view(np.uint8)
    even = np.where(ladder[:-1].astype(TYPES[name]).view(np.uint8) % 2 == 0, ladder[:-1], ladder[1:])
    np.testing.assert_array_equal(got, even.astype(TYPES[name]).view(np.uint8))
    np.testing.assert_array_equal(fmt.encode(mid * (1 + 2 ** -20)).astype(np.float32), ladder[1:])


@pytest.mark.parametrize("name, largest", [("fp8_e4m3", 448.0), ("fp8_e5m2", 57344.0)])
def test_beyond_the_largest_finite_value_saturates(name, largest):
    fmt = weight_format(name)
    got = fmt.emulate(np.array([largest * 1.5, -1e30, np.inf, -np.inf], np.float32))
    assert got.tolist() == [largest, -largest, largest, -largest]
    assert np.isnan(fmt.emulate(np.array([np.nan], np.float32)))[0]


def test_e4m3_is_the_variant_without_infinities():
    fmt = weight_format("fp8_e4m3")
    codes = np.array([0x7E, 0x7F, 0xFF, 0x78, 0x01], np.uint8).view(fmt.storage)
    got = fmt.decode(codes)
    assert got[0] == 448 and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == 256 and got[4] == 2.0 ** -9


@pytest.mark.parametrize("name", FP8)
def test_row_scales_store_each_rows_largest_weight_at_448_without_saturating(name):
    fmt = weight_format(name)
    rng = np.random.default_rng(1)
    matrix = (rng.normal(size=(40, 9)) * np.logspace(-6, 4, 40)[:, None]).astype(np.float32)
    matrix[3] = 0
    elements, scales = fmt.stored(matrix, "matrix")
    assert scales.dtype == np.float32 and np.array_equal(scales, scales.astype(np.float16).astype(np.float32))
    assert scales[3] == 1 and not np.any(fmt.decode(elements[3]))
    top = np.abs(matrix).max(axis=1)
    rows = top > 0
    stored_top = top[rows] / scales[rows].astype(np.float64)
    assert np.all(stored_top <= 448)  # the row's largest is never saturated...
    smaller = np.nextafter(scales[rows].astype(np.float16), np.float16(0)).astype(np.float64)
    with np.errstate(divide="ignore"):  # the tiniest rows take the smallest float16 scale, below it is 0
        assert np.all(top[rows] / smaller > 448)  # ...and the scale is the smallest float16 that keeps it so
    np.testing.assert_array_equal(fmt.decode(elements), fmt.emulate(matrix / scales[:, None]))


@pytest.mark.parametrize("name", FP8)
def test_vectors_are_stored_as_float16(name):
    fmt = weight_format(name)
    stored, scales = fmt.stored(np.array([1 / 3, 1000.5], np.float32), "vector")
    assert stored.dtype == np.float16 and scales is None and fmt.vectors.name == "fp16"


@pytest.mark.parametrize("name", FP8)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_matrix_with_weights_that_are_not_finite_is_refused(name, bad):
    matrix = np.ones((2, 2), np.float32)
    matrix[1, 0] = bad
    with pytest.raises(CompileError, match="'fc.weight' has weights that are not finite"):
        weight_format(name).stored(matrix, "matrix", "matrix 'fc.weight'")


@pytest.mark.parametrize("name", FP8)
def test_a_weight_beyond_what_a_float16_row_scale_reaches_is_refused(name):
    """65504 x 448 is the most a row scale reaches: a larger weight would get an infinite scale and read as 0."""
    matrix = np.ones((3, 2), np.float32)
    matrix[2, 1] = 3e7
    with pytest.raises(CompileError, match=r"'fc.weight' has a weight of magnitude 3e\+07 \(row 2\), beyond what a "
                                           r"scaled 8-bit format stores \(its float16 row scale times 448: up to "
                                           r"2\.93458e\+07\); use weights='fp32'"):
        weight_format(name).stored(matrix, "matrix", "matrix 'fc.weight'")
    matrix[2, 1] = 2.9e7
    assert np.isfinite(weight_format(name).stored(matrix, "matrix", "matrix 'fc.weight'")[1]).all()
