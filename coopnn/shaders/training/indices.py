"""Unsigned 32-bit index arithmetic for training kernels (`Indices`): the element offsets, tile corners and bounds
checks every kernel computes, named once here rather than as SPIR-V opcode names at each use."""

from __future__ import annotations


class Indices:
    """u32 arithmetic and comparisons emitted into `frame`'s main function; operands are ids, results ids."""

    def __init__(self, frame):
        self.frame, self.fn, self.u32, self.bool = frame, frame.main, frame.u32, frame.bool

    def _u32(self, opname: str, *operands):
        return self.fn.emit(opname, self.u32, *operands)

    def _bool(self, opname: str, *operands):
        return self.fn.emit(opname, self.bool, *operands)

    def add(self, a, b):
        return self._u32("OpIAdd", a, b)

    def sub(self, a, b):
        return self._u32("OpISub", a, b)

    def mul(self, a, b):
        return self._u32("OpIMul", a, b)

    def div(self, a, b):
        return self._u32("OpUDiv", a, b)

    def mod(self, a, b):
        return self._u32("OpUMod", a, b)

    def shift_right(self, a, bits):
        return self._u32("OpShiftRightLogical", a, bits)

    def less(self, a, b):
        return self._bool("OpULessThan", a, b)

    def at_least(self, a, b):
        return self._bool("OpUGreaterThanEqual", a, b)

    def equal(self, a, b):
        return self._bool("OpIEqual", a, b)

    def both(self, a, b):
        return self._bool("OpLogicalAnd", a, b)

    def within(self, value, low: int, high: int):
        """low <= value < high, for constant bounds."""
        return self.both(self.at_least(value, self.frame.uint(low)), self.less(value, self.frame.uint(high)))
