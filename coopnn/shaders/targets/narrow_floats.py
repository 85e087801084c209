"""Narrow floats in plain SPIR-V: reading 8- and 16-bit float elements out of a weight buffer of 32-bit words and
widening them to float32, and rounding float32 to float16 values (kept in float32), both exactly and with integer
operations only, so they need no device feature (no 8-bit storage, Float8EXT, Float16 or 16-bit storage) and do not
depend on a driver's conversion rounding mode: what the 8-bit float weight formats need on the portable target.

Widening follows the element's bits (sign, exponent, mantissa; subnormals; E4M3fn's NaN at S.1111.111 and no
infinities, the IEEE-like formats' infinities and NaNs); rounding is to nearest even, beyond float16's range to
infinity, as numpy's float32 to float16 conversion (`coopnn.layouts.formats.fp16.round_fp16`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from coopnn.shaders.targets.integer_words import QUIET_NAN, IntegerWords

# float32 bit patterns
SIGN, MAGNITUDE, INFINITY = 0x80000000, 0x7FFFFFFF, 0x7F800000


class NarrowFloats:
    """Emits the reads and roundings into the `main` of a `ShaderFrame` whose weight buffer is 32-bit words."""

    def __init__(self, frame):
        self.frame, self.fn, self.m = frame, frame.main, frame.module
        self.ops = self.fn.ops
        self.u32, self.f32, self.bool = frame.u32, frame.f32, frame.bool
        self.words = IntegerWords(frame)

    def u(self, value: int):
        return self.frame.uint(value)

    def bits_as_f32(self, bits: int):
        return self.ops.bitcast(self.f32, self.u(bits))

    def read(self, byte_offset: int, storage: np.dtype, index):
        """Element `index` (a u32 id) of an array of `storage` floats at `byte_offset` of the weight buffer, as
        float32: the element's bits are cut out of the word holding them (little-endian, as numpy wrote them)."""
        storage = np.dtype(storage)
        step = index if storage.itemsize == 1 else self.ops.int_mul(self.u32, index, self.u(storage.itemsize))
        code = self.ops.bitcast(self.u32, self.words.bits(byte_offset, step, 8 * storage.itemsize, signed=False))
        return self.decode(code, storage)

    def decode(self, code, storage: np.dtype):
        """The float32 value of the `storage` float whose bits are the low bits of the u32 `code`."""
        info = ml_dtypes.finfo(storage)
        e_bits, m_bits, bias = info.nexp, info.nmant, 1 - info.minexp
        e_max, m_max = (1 << e_bits) - 1, (1 << m_bits) - 1
        all_ones = np.array([e_max << m_bits], f"u{storage.itemsize}").view(storage).astype(np.float32)[0]
        u32 = self.u32
        exponent = self.ops.bitwise_and(u32, self.ops.shift_right(u32, code, self.u(m_bits)), self.u(e_max))
        mantissa = self.ops.bitwise_and(u32, code, self.u(m_max))
        subnormal = self.ops.int_equal(self.bool, exponent, self.u(0))
        significand = self.ops.select(u32, subnormal, mantissa,
                                      self.ops.bitwise_or(u32, mantissa, self.u(1 << m_bits)))
        # value = significand * 2^(max(exponent, 1) - bias - m_bits); the power of two is a normal float32 for every
        # format here, built from its bits, and the product is exact
        scale_exponent = self.ops.select(u32, subnormal, self.u(1), exponent)
        power = self.ops.bitcast(self.f32, self.ops.shift_left(u32, self.ops.int_add(
            u32, scale_exponent, self.u(127 - bias - m_bits)), self.u(23)))
        value = self.ops.float_mul(self.f32, self.ops.uint_to_float(self.f32, significand), power)
        top = self.ops.int_equal(self.bool, exponent, self.u(e_max))
        if np.isinf(all_ones):  # IEEE-like: the top exponent holds infinity (mantissa 0) and NaNs
            special = self.ops.select(self.f32, self.ops.int_equal(self.bool, mantissa, self.u(0)),
                                      self.bits_as_f32(INFINITY), self.bits_as_f32(QUIET_NAN))
            value = self.ops.select(self.f32, top, special, value)
        else:  # E4M3fn: only S.1111.111 is NaN, the rest of the top exponent are numbers
            nan = self.ops.logical_and(self.bool, top, self.ops.int_equal(self.bool, mantissa, self.u(m_max)))
            value = self.ops.select(self.f32, nan, self.bits_as_f32(QUIET_NAN), value)
        sign_bit = self.ops.bitwise_and(u32, code, self.u(1 << (e_bits + m_bits)))
        negative = self.ops.int_not_equal(self.bool, sign_bit, self.u(0))
        return self.ops.select(self.f32, negative, self.ops.float_negate(self.f32, value), value)

    def round_fp16(self, x):
        """float32 `x` rounded to the nearest float16 (ties to even), as float32: beyond float16's range to infinity,
        as numpy's conversion; NaN stays NaN."""
        info = ml_dtypes.finfo(np.float16)
        dropped = 23 - info.nmant
        u32 = self.u32
        bits = self.ops.bitcast(u32, x)
        sign = self.ops.bitwise_and(u32, bits, self.u(SIGN))
        magnitude = self.ops.bitwise_and(u32, bits, self.u(MAGNITUDE))
        # normal range: drop the low mantissa bits, adding just under half of them plus the kept lowest bit (a tie
        # rounds up to even); a carry moves into the exponent, as it should
        odd = self.ops.bitwise_and(u32, self.ops.shift_right(u32, magnitude, self.u(dropped)), self.u(1))
        normal = self.ops.bitwise_and(u32, self.ops.int_add(u32, magnitude, self.ops.int_add(
            u32, odd, self.u((1 << (dropped - 1)) - 1))), self.u((0xFFFFFFFF << dropped) & MAGNITUDE))
        # below the smallest normal the spacing is 2^(minexp - nmant), float32's in [2^(minexp - nmant + 23), twice
        # that): adding that power of two rounds to it (ties to even), and taking it away again is exact;
        # NoContraction keeps a compiler from folding the pair away
        magic = self.m.constant(self.f32, float(2.0 ** (info.minexp - info.nmant + 23)))
        shifted = self.ops.float_add(self.f32, self.ops.bitcast(self.f32, magnitude), magic)
        tiny = self.ops.float_sub(self.f32, shifted, magic)
        for exact in (shifted, tiny):
            self.m.decorate(exact, "NoContraction")
        # halfway from the largest finite value to the next power of two, where rounding reaches infinity
        overflow = float(info.max) + 2.0 ** (info.maxexp - info.nmant - 2)
        rounded = self.ops.select(u32, self.ops.uint_at_least(self.bool, magnitude, self.u(float32_bits(overflow))),
                                  self.u(INFINITY), normal)
        rounded = self.ops.select(u32, self.ops.uint_greater(self.bool, magnitude, self.u(INFINITY)),
                                  magnitude, rounded)  # NaN stays NaN
        smallest_normal = self.u(float32_bits(info.smallest_normal))
        rounded = self.ops.select(u32, self.ops.uint_less(self.bool, magnitude, smallest_normal),
                                  self.ops.bitcast(u32, tiny), rounded)
        return self.ops.bitcast(self.f32, self.ops.bitwise_or(u32, rounded, sign))


def float32_bits(value) -> int:
    return int(np.array(float(value), np.float32).view(np.uint32))
