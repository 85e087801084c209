"""Literal operands as SPIR-V words: numbers of any scalar type (16/32/64-bit floats, bfloat16, fp8, integers of
8 to 64 bits), nul-terminated UTF-8 strings, and their text form for the disassembler."""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from coopnn.shaders.spirv.errors import SpirvBuildError

# (width, FPEncoding enumerant or None for IEEE 754) -> numpy type holding that format's bits.
FLOAT_FORMATS = {
    (16, None): np.float16,
    (32, None): np.float32,
    (64, None): np.float64,
    (16, "BFloat16KHR"): ml_dtypes.bfloat16,
    (8, "Float8E4M3EXT"): ml_dtypes.float8_e4m3fn,
    (8, "Float8E5M2EXT"): ml_dtypes.float8_e5m2,
}
BITS_TYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
# Exponent and mantissa widths of the IEEE formats, to print infinities and NaNs the way spirv-dis does.
IEEE_FIELDS = {16: (5, 10), 32: (8, 23), 64: (11, 52)}
# spirv-dis prints normal float32/float64 values in decimal with enough digits to round-trip, the rest in hex.
DECIMAL_DIGITS = {(32, None): 9, (64, None): 17}
SMALLEST_NORMAL = {32: 2.0 ** -126, 64: 2.0 ** -1022}


@dataclass(frozen=True)
class NumberFormat:
    """How a scalar type stores a literal: float (with its FPEncoding, None for IEEE) or int (signed or not)."""

    is_float: bool
    width: int
    signed: bool = False
    encoding: str | None = None

    @property
    def word_count(self) -> int:
        return 2 if self.width > 32 else 1

    def describe(self) -> str:
        if self.is_float:
            return f"float{self.width}" + (f" ({self.encoding})" if self.encoding else "")
        return f"{'int' if self.signed else 'uint'}{self.width}"


def _float_type(fmt: NumberFormat):
    try:
        return FLOAT_FORMATS[(fmt.width, fmt.encoding)]
    except KeyError:
        raise SpirvBuildError(f"no literal encoding for {fmt.describe()}") from None


def _split(bits: int, word_count: int) -> list[int]:
    """Low-order word first, as SPIR-V stores multi-word literals."""
    return [(bits >> (32 * i)) & 0xFFFFFFFF for i in range(word_count)]


def number_words(fmt: NumberFormat, value: int | float) -> list[int]:
    """The words of a literal number of the given format; raises if the value does not fit."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpirvBuildError(f"a {fmt.describe()} literal needs a number, got {value!r}")
    if fmt.is_float:
        with np.errstate(over="ignore"):
            stored = np.array([value], dtype=_float_type(fmt))
        if math.isfinite(value) and not np.isfinite(stored[0]):
            raise SpirvBuildError(f"{value!r} does not fit in {fmt.describe()}")
        return _split(int(stored.view(BITS_TYPES[fmt.width])[0]), fmt.word_count)
    if not isinstance(value, int):
        raise SpirvBuildError(f"a {fmt.describe()} literal needs an int, got {value!r}")
    low, high = (-(1 << (fmt.width - 1)), 1 << (fmt.width - 1)) if fmt.signed else (0, 1 << fmt.width)
    if not low <= value < high:
        raise SpirvBuildError(f"{value} does not fit in {fmt.describe()}")
    # Narrow signed values are sign-extended to the full word, narrow unsigned ones zero-extended (spec 2.2.1).
    return _split(value & ((1 << (32 * fmt.word_count)) - 1), fmt.word_count)


def number_from_words(fmt: NumberFormat, words: list[int]) -> int | float:
    bits = sum(w << (32 * i) for i, w in enumerate(words)) & ((1 << fmt.width) - 1)
    if fmt.is_float:
        return float(np.array([bits], dtype=BITS_TYPES[fmt.width]).view(_float_type(fmt))[0])
    if fmt.signed and bits >> (fmt.width - 1):
        return bits - (1 << fmt.width)
    return bits


def format_number(fmt: NumberFormat, words: list[int]) -> str:
    """The literal as spirv-dis prints it (and spirv-as reads it back): integers in decimal; normal 32/64-bit floats
    with 9/17 significant digits; other floats (16-bit, subnormal, non-IEEE) in hex; infinities and NaNs as hex
    floats with the maximal exponent."""
    value = number_from_words(fmt, words)
    if not fmt.is_float:
        return str(value)
    if not math.isfinite(value):
        return _non_finite_hex(fmt, words)
    digits = DECIMAL_DIGITS.get((fmt.width, fmt.encoding))
    if digits and (value == 0 or abs(value) >= SMALLEST_NORMAL[fmt.width]):
        return f"{value:.{digits}g}"
    mantissa, exponent = float.hex(value).split("p")
    return f"{mantissa.rstrip('0').rstrip('.')}p{exponent}"


def _non_finite_hex(fmt: NumberFormat, words: list[int]) -> str:
    exponent_bits, mantissa_bits = IEEE_FIELDS[fmt.width]
    bits = sum(w << (32 * i) for i, w in enumerate(words))
    sign = "-" if bits >> (fmt.width - 1) else ""
    mantissa = bits & ((1 << mantissa_bits) - 1)
    digits = (mantissa_bits + 3) // 4
    fraction = f"{mantissa << (4 * digits - mantissa_bits):0{digits}x}".rstrip("0")
    return f"{sign}0x1{'.' + fraction if fraction else ''}p+{1 << (exponent_bits - 1)}"


def string_words(text: str) -> list[int]:
    """UTF-8, nul-terminated, padded with zero bytes to whole little-endian words."""
    data = text.encode("utf-8") + b"\0"
    data += b"\0" * (-len(data) % 4)
    return [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]


def string_from_words(words: list[int]) -> tuple[str, int]:
    """The string starting at words[0] and how many words it takes."""
    data = bytearray()
    for count, word in enumerate(words, start=1):
        chunk = word.to_bytes(4, "little")
        if 0 in chunk:
            data += chunk[:chunk.index(0)]
            return data.decode("utf-8"), count
        data += chunk
    raise SpirvBuildError("literal string without a terminating nul")
