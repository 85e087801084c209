"""The coopmat2 target's block-format weights in SPIR-V: the matrices' blocks as a second view of the weight buffer,
and the DecodeFunc (and DecodeVectorFunc) that OpCooperativeMatrixLoadTensorNV calls for each weight.

A block format (GGML's Q8_0 and Q4_0, `coopnn.layouts.formats.blocks`) stores a matrix as rows of blocks: a
float16 scale d, then the codes. Here a block is a struct {float16 d; uint16 qs[]} (the codes read as 16-bit words,
as the blocks are only 2-byte aligned), and the weight buffer (binding 0) is also declared as a struct holding each
block matrix as an array of such blocks at its packed offset (descriptor aliasing, as llama.cpp's Vulkan shaders
declare their packed views of binding 0), so a load's Pointer is a matrix's first block. The tensor layout counts
blocks (OpTensorLayoutSetBlockSizeNV (1, block size)), and the decode function receives a PhysicalStorageBuffer
pointer to the weight's block, its blockCoord and its coordInBlock.

A decoded weight is float16(d * (q - zero)): the product is exact in float32 (an 11-bit scale times a code of at
most 8 bits) and rounded once to float16 (nearest even), the matrix's component type. Code j of a block sits in
byte j mod (bytes of codes), in its low bits for the first run of codes and the next bits for the next run (GGML's
nibble order for Q4_0: weight j in the low nibble of byte j, weight j + 16 in its high nibble).

The DecodeVectorFunc (SPV_NV_cooperative_matrix_decode_vector) decodes `vector_width(fmt)` codes at once, the codes
of one 32-bit word (8 for 4-bit codes, 4 for 8-bit ones): consecutive codes of one run, from a multiple of V.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import Entry
from coopnn.shaders.spirv import Id
from coopnn.shaders.spirv.cooperative_matrix2 import decode_function
from coopnn.shaders.spirv.function import Function

WORD_BYTES = 2  # codes are read as 16-bit words
SCALE_BYTES = 2  # the float16 scale before them
# what the module needs of the device to read blocks this way: DecodeFunc, PhysicalStorageBuffer pointers, 16-bit
# integers
FEATURES = frozenset({"cooperativeMatrixBlockLoads", "bufferDeviceAddress", "shaderInt16"})
DECODE_VECTOR_FEATURE = "cooperativeMatrixDecodeVector"


def vector_width(fmt: WeightFormat) -> int:
    """V of the format's DecodeVectorFunc: the codes of one 32-bit word, at most 8 (the extension's widest)."""
    return min(8, 32 // fmt.bits)


def code_bytes(fmt: WeightFormat) -> int:
    """The bytes of codes in one block; code j sits in byte j mod this, in bits (j div this) * bits."""
    return fmt.blocks.size * fmt.bits // 8


@dataclass(frozen=True)
class Decoders:
    """A block format's decode functions in one module: the scalar one, and the vector one where emitted."""

    scalar: Function
    vector: Function | None


class BlockMatrices:
    """The block matrices of one weight image (`entries`, in offset order) in the module of `frame`
    (`coopnn.shaders.targets.base.ShaderFrame`, binding 0 the weight buffer)."""

    def __init__(self, frame, fmt: WeightFormat, entries: Mapping[str, Entry], decode_vector: bool):
        self.frame, self.fmt = frame, fmt
        m = self.m = frame.module
        m.addressing_model = "PhysicalStorageBuffer64"  # the decode functions' block pointers
        self.f16, self.f32, self.u32, self.u16 = m.type_float(16), m.type_float(32), frame.u32, m.type_int(16, False)
        block_bytes = fmt.storage.itemsize
        words = m.type_array(self.u16, code_bytes(fmt) // WORD_BYTES, stride=WORD_BYTES)
        self.block = m.type_struct([self.f16, words], offsets=[0, SCALE_BYTES], name=f"block_{fmt.name}",
                                   member_names=["d", "qs"])
        ordered = sorted(entries.values(), key=lambda e: e.offset)
        arrays = [m.type_array(self.block, e.size // block_bytes, stride=block_bytes) for e in ordered]
        view = m.type_struct(arrays, offsets=[e.offset for e in ordered], decorations=["Block"],
                             name=f"Weights_{fmt.name}", member_names=[e.name for e in ordered])
        self.variable = m.global_variable("StorageBuffer", view, name=f"weights_{fmt.name}",
                                          decorations=["NonWritable", ("DescriptorSet", 0), ("Binding", 0)])
        self.member = {e.name: i for i, e in enumerate(ordered)}
        pointer = m.type_pointer("PhysicalStorageBuffer", self.block)
        scalar = decode_function(m, self.f16, pointer, 2, name=f"decode_{fmt.name}")
        self._emit(scalar, 1)
        vector = None
        if decode_vector:
            vector = decode_function(m, self.f16, pointer, 2, components=vector_width(fmt),
                                     name=f"decode_{fmt.name}_x{vector_width(fmt)}")
            self._emit(vector, vector_width(fmt))
        self.decoders = Decoders(scalar, vector)

    def pointer(self, name: str) -> Id:
        """A StorageBuffer pointer to the first block of matrix `name`."""
        fn, m = self.frame.main, self.m
        return fn.ops.access_chain(m.type_pointer("StorageBuffer", self.block), self.variable,
                                   self.frame.uint(self.member[name]), self.frame.zero)

    def _emit(self, fn: Function, count: int) -> None:
        """The body of a decode function returning `count` weights from coordInBlock[1] on."""
        m, fmt, u = self.m, self.fmt, self.frame.uint
        block, _, coord_in_block = fn.params
        j = fn.ops.extract(self.u32, coord_in_block, 1, name="j")
        run_bytes = code_bytes(fmt)
        first_byte = fn.ops.uint_mod(self.u32, j, u(run_bytes))
        shift = fn.ops.int_mul(self.u32, fn.ops.uint_div(self.u32, j, u(run_bytes)), u(fmt.bits))
        scale_pointer = fn.ops.access_chain(m.type_pointer("PhysicalStorageBuffer", self.f16), block, u(0))
        scale = fn.ops.float_convert(self.f32, fn.ops.load(self.f16, scale_pointer, "Aligned", SCALE_BYTES),
                                     name="d")
        word_pointer = m.type_pointer("PhysicalStorageBuffer", self.u16)
        values = []
        for k in range(count):
            byte = fn.ops.int_add(self.u32, first_byte, u(k)) if k else first_byte
            at = fn.ops.access_chain(word_pointer, block, u(1), fn.ops.shift_right(self.u32, byte, u(1)))
            word = fn.ops.uint_convert(self.u32, fn.ops.load(self.u16, at, "Aligned", WORD_BYTES))
            # the byte's half of the word (little-endian), then this run's bits of the byte
            low = fn.ops.int_mul(self.u32, fn.ops.bitwise_and(self.u32, byte, u(1)), u(8))
            values.append(self._code(fn, word, fn.ops.int_add(self.u32, low, shift)))
        if count == 1:
            weight = fn.ops.float_mul(self.f32, scale, values[0])
            fn.return_(fn.ops.float_convert(self.f16, weight))
            return
        codes = fn.ops.construct(m.type_vector(self.f32, count), *values)
        weights = fn.ops.vector_times_scalar(m.type_vector(self.f32, count), codes, scale)
        fn.return_(fn.ops.float_convert(m.type_vector(self.f16, count), weights))

    def _code(self, fn: Function, word: Id, position: Id) -> Id:
        """(q - zero) as float32 for the `bits` of `word` from `position`."""
        blocks, bits = self.fmt.blocks, self.frame.uint(self.fmt.bits)
        if blocks.signed:
            s32 = self.m.type_int(32, True)
            code = fn.ops.bitfield_int_extract(s32, fn.ops.bitcast(s32, word), position, bits)
            value = fn.ops.int_to_float(self.f32, code)
        else:
            value = fn.ops.uint_to_float(self.f32, fn.ops.bitfield_uint_extract(self.u32, word, position, bits))
        if blocks.zero:
            value = fn.ops.float_sub(self.f32, value, self.m.constant(self.f32, float(blocks.zero)))
        return value
