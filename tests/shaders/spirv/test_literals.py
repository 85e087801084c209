"""Literal words: strings, narrow and 64-bit integers, float16/bfloat16/float64, and their text form."""

from __future__ import annotations

import math

import pytest

from coopnn.shaders.spirv import SpirvBuildError
from coopnn.shaders.spirv.literals import (
    NumberFormat,
    format_number,
    number_from_words,
    number_words,
    string_from_words,
    string_words,
)

F16, F32, F64 = NumberFormat(True, 16), NumberFormat(True, 32), NumberFormat(True, 64)
I16, U16, I64, U64 = NumberFormat(False, 16, True), NumberFormat(False, 16), NumberFormat(False, 64, True), \
    NumberFormat(False, 64)


@pytest.mark.parametrize("text, words", [
    ("", [0]),
    ("abc", [0x00636261]),
    ("abcd", [0x64636261, 0]),
    ("main", [0x6E69616D, 0]),
    ("GLSL.std.450", [0x4C534C47, 0x6474732E, 0x3035342E, 0]),
])
def test_strings_are_nul_terminated_and_padded_to_words(text, words):
    assert string_words(text) == words
    assert string_from_words(words + [0xDEADBEEF]) == (text, len(words))


def test_strings_are_utf8():
    assert string_from_words(string_words("größe")) == ("größe", 2)


def test_float16_constants():
    assert number_words(F16, 1.0) == [0x3C00]
    assert number_words(F16, -2.0) == [0xC000]
    assert number_words(F16, 65504.0) == [0x7BFF]
    assert number_words(F16, 0.1) == [0x2E66]  # rounded to nearest even
    assert number_from_words(F16, [0x3555]) == pytest.approx(1 / 3, rel=1e-3)


def test_float16_overflow_is_an_error_but_infinity_is_not():
    with pytest.raises(SpirvBuildError, match="70000.0 does not fit in float16"):
        number_words(F16, 70000.0)
    assert number_words(F16, math.inf) == [0x7C00]


def test_64_bit_literals_put_the_low_word_first():
    assert number_words(U64, 0x0123456789ABCDEF) == [0x89ABCDEF, 0x01234567]
    assert number_words(I64, -2) == [0xFFFFFFFE, 0xFFFFFFFF]
    assert number_words(F64, 1.0) == [0, 0x3FF00000]
    assert number_from_words(I64, [0xFFFFFFFE, 0xFFFFFFFF]) == -2


def test_narrow_signed_integers_are_sign_extended_and_unsigned_zero_extended():
    assert number_words(I16, -1) == [0xFFFFFFFF]
    assert number_words(U16, 0xFFFF) == [0x0000FFFF]
    assert number_from_words(I16, [0xFFFFFFFF]) == -1


@pytest.mark.parametrize("fmt, value", [(U16, -1), (U16, 65536), (I16, 32768), (NumberFormat(False, 32), 1.5)])
def test_integers_out_of_range_or_not_integral_are_errors(fmt, value):
    with pytest.raises(SpirvBuildError):
        number_words(fmt, value)


def test_bfloat16_and_fp8_encodings():
    assert number_words(NumberFormat(True, 16, encoding="BFloat16KHR"), 1.0) == [0x3F80]
    assert number_words(NumberFormat(True, 8, encoding="Float8E4M3EXT"), 1.0) == [0x38]


@pytest.mark.parametrize("fmt, value, text", [
    (F32, 0.5, "0.5"),
    (F32, 0.1, "0.100000001"),
    (F32, -0.0, "-0"),
    (F64, 0.1, "0.10000000000000001"),
    (F16, 1.0, "0x1p+0"),
    (F16, 0.1, "0x1.998p-4"),
    (F32, math.inf, "0x1p+128"),
    (F32, -math.inf, "-0x1p+128"),
    (F32, math.nan, "0x1.8p+128"),
    (F32, 1e-40, "0x1.16c2p-133"),
    (I16, -3, "-3"),
])
def test_numbers_print_as_spirv_dis_prints_them(fmt, value, text):
    assert format_number(fmt, number_words(fmt, value)) == text
