"""q8_0 against GGML's Q8_0 (ggml-org/llama.cpp: block_q8_0 in ggml/src/ggml-common.h, quantize_row_q8_0_ref and
dequantize_row_q8_0 in ggml/src/ggml-quants.c): a block worked by hand, its rounding (roundf: half away from zero,
where numpy rounds half to even), and the error of a round trip."""

from __future__ import annotations

import numpy as np

from coopnn.layouts.formats.q8_0 import FORMAT


def test_a_block_worked_by_hand():
    # amax = 7.9375 = 127 / 16, so d = amax / 127 = 1/16 exactly (float16 0x2C00, stored little-endian: 00 2c) and
    # id = 16: 7.9375 -> 127 (0x7f), -0.15625 -> -2.5 -> roundf -3 (0xfd), 0.09375 -> 1.5 -> 2, 0.03125 -> 0.5 -> 1,
    # -7.9375 -> -127 (0x81), 1/3 -> 5.33 -> 5, zeros -> 0: 2 + 32 bytes
    w = np.zeros(32, np.float32)
    w[:6] = [7.9375, -0.15625, 0.09375, 0.03125, -7.9375, 1 / 3]
    stored = FORMAT.encode(w)
    assert stored.tobytes() == bytes.fromhex("002c" + "7ffd02018105" + "00" * 26)
    assert stored.dtype.itemsize == 34
    want = np.zeros(32, np.float32)
    want[:6] = np.array([127, -3, 2, 1, -127, 5]) / 16
    np.testing.assert_array_equal(FORMAT.emulate(w), want)


def test_the_codes_are_computed_from_the_float32_scale_and_the_float16_scale_is_stored():
    # amax = 1: d = float32(1/127), id = 1/d; GGML rounds d to float16 only as it stores it
    w = np.zeros(32, np.float32)
    w[:2] = [1.0, 0.5]
    stored = FORMAT.encode(w)
    d = np.float32(1) / np.float32(127)
    assert stored["d"][0] == np.float16(d)
    assert list(stored["qs"][0][:2]) == [127, 64]  # 0.5 * id = 63.5 -> 64 (away from zero)
    np.testing.assert_array_equal(FORMAT.emulate(w)[:2], np.float32(np.float16(d)) * np.array([127, 64], np.float32))


def test_a_round_trip_is_within_half_a_step_of_each_block():
    rng = np.random.default_rng(0)
    w = (rng.normal(size=(16, 96)) * np.exp(rng.normal(size=(16, 1)) * 3)).astype(np.float32)
    blocks = np.abs(w).reshape(16, 3, 32).max(axis=-1)
    step = np.repeat(blocks / 127, 32, axis=1)
    # half a step, plus the float16 rounding of the scale for the largest code
    assert (np.abs(FORMAT.emulate(w) - w) <= step * (0.5 + 127 * 2.0 ** -11)).all()
