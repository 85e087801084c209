"""Integer weight formats in plain SPIR-V: reading 8-bit integers, narrower bit fields (a block format's 4-bit
codes), 32-bit integers and float32 numbers out of a weight buffer of 32-bit words (8-bit storage needs a device
feature; words need none), and quantizing a float32 input exactly as step 1 of `coopnn.layouts.formats.integer`
defines it, so that a shader matches the numpy emulation bit for bit.
"""

from __future__ import annotations
from coopnn.shaders.spirv.ops import Ops

# float32 bit pattern of the NaN numpy writes (np.float32(np.nan))
QUIET_NAN = 0x7FC00000


class IntegerWords:
    """Emits the reads and the quantization into the `main` of a `ShaderFrame` whose weight buffer is 32-bit
    words."""

    def __init__(self, frame):
        self.frame, self.fn, self.m = frame, frame.main, frame.module
        self.u32, self.f32, self.bool = frame.u32, frame.f32, frame.bool
        self.s32 = self.m.type_int(32, True)

    def word(self, word_index):
        return self.fn.ops.load(self.u32, self.frame.element_pointer(0, word_index, self.u32))

    def int8(self, byte_offset: int, index):
        """Byte `index` (a u32 id) of an array of 8-bit integers at `byte_offset`, sign-extended to 32 bits."""
        return self.bits(byte_offset, index, 8, signed=True)

    def bits(self, byte_offset: int, index, width: int, signed: bool, first=None):
        """`width` bits of byte `index` (a u32 id) of an array of bytes at `byte_offset`, from its bit `first` (a
        u32 id; None: bit 0) up, as a 32-bit integer, sign-extended when `signed` (the buffer is little-endian, as
        numpy wrote it)."""
        byte = self.fn.ops.int_add(self.u32, self.frame.uint(byte_offset), index)
        word = self.word(self.fn.ops.shift_right(self.u32, byte, self.frame.uint(2)))
        shift = self.fn.ops.shift_left(self.u32, self.fn.ops.bitwise_and(self.u32, byte, self.frame.uint(3)),
                                       self.frame.uint(3))
        if first is not None:
            shift = self.fn.ops.int_add(self.u32, shift, first)
        extract = Ops.bitfield_int_extract if signed else Ops.bitfield_uint_extract
        return extract(self.fn.ops, self.s32, self.fn.ops.bitcast(self.s32, word), shift, self.frame.uint(width))

    def _word_at(self, byte_offset: int, index):
        if byte_offset % 4:
            raise ValueError(f"32-bit values at byte {byte_offset}, which is not a multiple of 4")
        return self.word(self.fn.ops.int_add(self.u32, self.frame.uint(byte_offset // 4), index))

    def int32(self, byte_offset: int, index):
        """Element `index` (a u32 id) of an array of 32-bit integers at `byte_offset`."""
        return self.fn.ops.bitcast(self.s32, self._word_at(byte_offset, index))

    def float32(self, byte_offset: int, index):
        """Element `index` (a u32 id) of an array of float32 numbers at `byte_offset`."""
        return self.fn.ops.bitcast(self.f32, self._word_at(byte_offset, index))

    def nan(self):
        return self.fn.ops.bitcast(self.f32, self.frame.uint(QUIET_NAN))

    def quantize(self, x, multiplier, largest: int):
        """float32 `x` as a 32-bit integer: x * multiplier in float32, rounded half to even (GLSL.std.450
        RoundEven, exact), clamped to [-largest, largest], and 0 for NaN (checked on the product, so that however a
        compiler writes the clamp, OpConvertFToS never sees NaN)."""
        f32, bool_ = self.f32, self.bool
        product = self.fn.ops.float_mul(f32, x, multiplier)
        rounded = self.fn.ext_inst(f32, "RoundEven", product)
        top, bottom = self.m.constant(f32, float(largest)), self.m.constant(f32, -float(largest))
        clamped = self.fn.ops.select(f32, self.fn.ops.float_less(bool_, rounded, bottom), bottom, rounded)
        clamped = self.fn.ops.select(f32, self.fn.ops.float_greater(bool_, clamped, top), top, clamped)
        number = self.fn.ops.select(f32, self.fn.ops.is_nan(bool_, product), self.m.constant(f32, 0.0), clamped)
        return self.fn.ops.float_to_int(self.s32, number)
