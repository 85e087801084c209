"""q4_0 against GGML's Q4_0 (ggml-org/llama.cpp: block_q4_0 in ggml/src/ggml-common.h, quantize_row_q4_0_ref and
dequantize_row_q4_0 in ggml/src/ggml-quants.c): a block worked by hand with GGML's nibble order, the sign of the
scale, the zero block's -0 scale, and the error of a round trip."""

from __future__ import annotations

import numpy as np

from coopnn.layouts.formats.q4_0 import FORMAT


def test_a_block_worked_by_hand():
    # max = -1.0, the first weight of the largest magnitude (1.0 at j = 2 comes later), so d = max / -8 = 0.125
    # (float16 0x3000: 00 30) and id = 8; q = min(15, trunc(w * 8 + 8.5)): 0.5 -> 12, -1 -> 0, 1 -> 16.5 -> 15,
    # 0.0625 -> 9.0 -> 9, -0.5 (j = 16) -> 4, 0.1875 (j = 17) -> 10, 0.9 (j = 31) -> 15.7 -> 15, zeros -> 8.
    # Byte j holds weight j in its low nibble and weight j + 16 in its high nibble: 0x4c, 0xa0, 0x8f, 0x89,
    # 0x88 (bytes 4 to 14), 0xf8
    w = np.zeros(32, np.float32)
    w[[0, 1, 2, 3, 16, 17, 31]] = [0.5, -1.0, 1.0, 0.0625, -0.5, 0.1875, 0.9]
    stored = FORMAT.encode(w)
    assert stored.tobytes() == bytes.fromhex("0030" + "4ca08f89" + "88" * 11 + "f8")
    assert stored.dtype.itemsize == 18
    want = np.zeros(32, np.float32)
    want[[0, 1, 2, 3, 16, 17, 31]] = [0.5, -1.0, 0.875, 0.125, -0.5, 0.25, 0.875]  # d * (q - 8)
    np.testing.assert_array_equal(FORMAT.emulate(w), want)


def test_the_scale_takes_the_sign_of_the_first_weight_of_the_largest_magnitude():
    # the largest-magnitude weight becomes code 0, d * -8 = itself; one of the other sign saturates at code 15
    first_positive = np.zeros(32, np.float32)
    first_positive[:2] = [2.0, -2.0]
    stored = FORMAT.encode(first_positive)
    assert stored["d"][0] == np.float16(-0.25) and list(stored["qs"][0][:2]) == [0x80, 0x8f]
    np.testing.assert_array_equal(FORMAT.emulate(first_positive)[:2], [2.0, -1.75])
    first_negative = -first_positive
    assert FORMAT.encode(first_negative)["d"][0] == np.float16(0.25)
    np.testing.assert_array_equal(FORMAT.emulate(first_negative)[:2], [-2.0, 1.75])


def test_the_sum_is_rounded_to_float32_before_it_is_truncated():
    # w * id + 8.5 with w * id = 0.5 - 2^-25: exactly 8.99999997, which float32 rounds to 9.0 (code 9, not 8)
    w = np.zeros(32, np.float32)
    w[0], w[1] = -8.0, np.float32(0.5 - 2.0 ** -25)
    assert FORMAT.encode(w)["qs"][0][1] & 0xF == 9


def test_a_round_trip_is_within_one_step_of_each_block():
    rng = np.random.default_rng(0)
    w = (rng.normal(size=(16, 96)) * np.exp(rng.normal(size=(16, 1)) * 3)).astype(np.float32)
    blocks = np.abs(w).reshape(16, 3, 32).max(axis=-1)
    step = np.repeat(blocks / 8, 32, axis=1)
    # half a step, but a full one where weights of the other sign saturate at 7 d (the block's extreme is -8 d)
    assert (np.abs(FORMAT.emulate(w) - w) <= step * (1 + 8 * 2.0 ** -11)).all()
