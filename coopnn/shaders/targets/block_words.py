"""Block-quantized matrices (GGML's Q8_0 and Q4_0: `coopnn.layouts.formats.blocks`) in plain SPIR-V: the weight at
(row, column) of a matrix stored as rows of blocks in a weight buffer of 32-bit words, decoded to float32 as the
numpy decoding does, d * (q - zero): the float16 scale widened by `NarrowFloats`, the code cut out of its byte by
`IntegerWords`, and the product exact in float32 (an 11-bit scale times a code of at most 8 bits), so that the
shader's weights are the numpy backend's bit for bit. No device feature is needed.
"""

from __future__ import annotations

import numpy as np

from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import Entry
from coopnn.shaders.targets.integer_words import IntegerWords
from coopnn.shaders.targets.narrow_floats import NarrowFloats
from coopnn.shaders.spirv.ops import Ops

SCALE = np.dtype(np.float16)  # a block's first bytes: its scale


class BlockWords:
    """Emits the reads of one block-format matrix (`entry`, row-major, in `fmt`) into the `main` of a `ShaderFrame`
    whose weight buffer is 32-bit words."""

    def __init__(self, frame, fmt: WeightFormat, entry: Entry):
        if entry.layout != "row_major" or fmt.blocks is None:
            raise ValueError(f"entry {entry.name!r} is not a row-major matrix of blocks")
        self.frame, self.fn, self.fmt, self.entry = frame, frame.main, fmt, entry
        self.narrow, self.words = NarrowFloats(frame), IntegerWords(frame)
        self.code_bytes = fmt.blocks.size * fmt.bits // 8  # one run of codes, each in its own bits of these bytes

    def op(self, instruction, *operands):
        return instruction(self.fn.ops, self.frame.u32, *operands)

    def weight(self, row, column):
        """The float32 weight at (`row`, `column`) (u32 ids)."""
        blocks, u = self.fmt.blocks, self.frame.uint
        block_bytes = self.fmt.storage.itemsize
        block = self.op(Ops.uint_div, column, u(blocks.size))
        j = self.op(Ops.uint_mod, column, u(blocks.size))
        # the block's first byte, relative to the entry: even, as the row stride and the block size are
        start = self.op(Ops.int_add, self.op(Ops.int_mul, row, u(self.entry.stride)),
                        self.op(Ops.int_mul, block, u(block_bytes)))
        scale = self.narrow.read(self.entry.offset, SCALE, self.op(Ops.shift_right, start, u(1)))
        byte = self.op(Ops.int_add, start,
                       self.op(Ops.int_add, u(SCALE.itemsize), self.op(Ops.uint_mod, j, u(self.code_bytes))))
        first = None
        if self.code_bytes < blocks.size:  # several runs of codes share the bytes: this code's run gives its bits
            first = self.op(Ops.int_mul, self.op(Ops.uint_div, j, u(self.code_bytes)), u(self.fmt.bits))
        code = self.words.bits(self.entry.offset, byte, self.fmt.bits, blocks.signed, first)
        if blocks.zero:
            code = self.fn.ops.int_sub(self.words.s32, code, self.frame.module.constant(self.words.s32, blocks.zero))
        return self.fn.ops.float_mul(self.frame.f32, scale, self.fn.ops.int_to_float(self.frame.f32, code))
