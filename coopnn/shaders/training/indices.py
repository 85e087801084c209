"""Unsigned 32-bit index arithmetic for training kernels (`Indices`): the element offsets, tile corners and bounds
checks every kernel computes, as named u32 operations on `coopnn.shaders.spirv.ops.Ops`."""

from __future__ import annotations

from coopnn.shaders.spirv.ops import Ops


class Indices:
    """u32 arithmetic and comparisons emitted into `frame`'s main function; operands are ids or ints (which become
    u32 constants), results ids."""

    def __init__(self, frame):
        self.frame, self.fn, self.u32, self.bool = frame, frame.main, frame.u32, frame.bool
        self.ops = Ops(frame.main)

    def _ids(self, operands):
        return tuple(self.frame.uint(o) if isinstance(o, int) else o for o in operands)

    def add(self, a, b):
        return self.ops.int_add(self.u32, *self._ids((a, b)))

    def sub(self, a, b):
        return self.ops.int_sub(self.u32, *self._ids((a, b)))

    def mul(self, a, b):
        return self.ops.int_mul(self.u32, *self._ids((a, b)))

    def div(self, a, b):
        return self.ops.uint_div(self.u32, *self._ids((a, b)))

    def mod(self, a, b):
        return self.ops.uint_mod(self.u32, *self._ids((a, b)))

    def shift_left(self, a, bits):
        return self.ops.shift_left(self.u32, *self._ids((a, bits)))

    def shift_right(self, a, bits):
        return self.ops.shift_right(self.u32, *self._ids((a, bits)))

    def bit_and(self, a, b):
        return self.ops.bitwise_and(self.u32, *self._ids((a, b)))

    def bit_or(self, a, b):
        return self.ops.bitwise_or(self.u32, *self._ids((a, b)))

    def less(self, a, b):
        return self.ops.uint_less(self.bool, *self._ids((a, b)))

    def at_least(self, a, b):
        return self.ops.uint_at_least(self.bool, *self._ids((a, b)))

    def equal(self, a, b):
        return self.ops.int_equal(self.bool, *self._ids((a, b)))

    def not_equal(self, a, b):
        return self.ops.int_not_equal(self.bool, *self._ids((a, b)))

    def both(self, a, b):
        return self.ops.logical_and(self.bool, a, b)

    def either(self, a, b):
        return self.ops.logical_or(self.bool, a, b)

    def within(self, value, low: int, high: int):
        """low <= value < high, for constant bounds."""
        return self.both(self.at_least(value, self.frame.uint(low)), self.less(value, self.frame.uint(high)))
