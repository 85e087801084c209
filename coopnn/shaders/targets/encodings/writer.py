"""`EncodingWriter`: what an encoding's emission writes one sample's SPIR-V with, in the function a target gives it.

Float32 arithmetic and GLSL.std.450 go through `ScalarWriter` (the targets' shared scalar forms); the grids'
integer arithmetic is tiny-cuda-nn's uint32 arithmetic (wrapping products, xor, modulo). A target hands in
`read(element)`, the float32 value of element `element` (a u32 id) of the encoding's parameter vector, wherever
its weight buffer keeps it, and may hand in `read_run(first, count)`, `count` consecutive elements from `first` (a
multiple of `count`) in one access, and `read_neighbours(first, other, count)`, the runs of two vertices that are
neighbours along a grid's first dimension, in one access where they share one aligned block of twice their length;
`offset_by` gives a nested encoding its own part of that vector.
"""

from __future__ import annotations

from typing import Callable, Sequence

from coopnn.shaders.spirv import Function, Id, Module
from coopnn.shaders.targets.scalar_writer import ScalarWriter

Reader = Callable[[Id], Id]
RunReader = Callable[[Id, int], list]
NeighbourReader = Callable[[Id, Id, int], tuple]
INT32_LIMIT = 2.0 ** 31


class EncodingWriter:
    def __init__(self, module: Module, fn: Function, read: Reader | None = None, read_run: RunReader | None = None,
                 read_neighbours: NeighbourReader | None = None):
        self.m, self.fn = module, fn
        self.scalars = ScalarWriter(module, fn)
        self.f32, self.boolean = self.scalars.f32, self.scalars.boolean
        self.u32, self.i32 = module.type_int(32, False), module.type_int(32, True)
        self._read = read
        self._read_run = read_run
        self._read_neighbours = read_neighbours

    # ----- parameters -----------------------------------------------------------------------------------------------

    def read(self, element: Id) -> Id:
        """Element `element` (u32 id) of the parameter vector, as float32."""
        if self._read is None:
            raise ValueError("this encoding has no parameter vector to read")
        return self._read(element)

    def read_run(self, first: Id, count: int) -> list:
        """Elements `first` .. `first + count - 1` of the parameter vector, as float32; `first` is a multiple of
        `count`. Element by element unless the target reads such runs in one access."""
        if self._read_run is not None:
            return self._read_run(first, count)
        return [self.read(self.add(first, self.uint(f)) if f else first) for f in range(count)]

    def read_neighbours(self, first: Id, other: Id, count: int) -> tuple[list, list]:
        """The runs of `count` elements from `first` and from `other` (each a multiple of `count`), as float32: one
        access for both where the target reads neighbours so and they share an aligned block of 2 `count`."""
        if self._read_neighbours is not None:
            return self._read_neighbours(first, other, count)
        return self.read_run(first, count), self.read_run(other, count)

    def offset_by(self, elements: int) -> "EncodingWriter":
        """A writer in the same function whose parameter vector starts `elements` into this one's (runs and
        neighbours read in one access only where `elements` keeps them aligned: a multiple of 4)."""
        if elements == 0 or self._read is None:
            return EncodingWriter(self.m, self.fn, self._read, self._read_run, self._read_neighbours)
        runs, neighbours = self._read_run, self._read_neighbours
        shifted = lambda first: self.add(first, self.uint(elements))  # noqa: E731
        return EncodingWriter(self.m, self.fn, lambda element: self.read(shifted(element)),
                              None if runs is None or elements % 4 else
                              lambda first, count: runs(shifted(first), count),
                              None if neighbours is None or elements % 4 else
                              lambda first, other, count: neighbours(shifted(first), shifted(other), count))

    # ----- float32 --------------------------------------------------------------------------------------------------

    def constant(self, value: float) -> Id:
        return self.scalars.constant(value)

    def add(self, a: Id, b: Id) -> Id:
        """a + b: float32 or u32, by the operands' type."""
        if self.m.type_of(a) == self.u32:
            return self.fn.ops.int_add(self.u32, a, b)
        return self.scalars.binary("add", a, b)

    def sub(self, a: Id, b: Id) -> Id:
        return self.scalars.binary("sub", a, b)

    def mul(self, a: Id, b: Id) -> Id:
        """a * b: float32, or u32 wrapping around as tcnn's products do."""
        if self.m.type_of(a) == self.u32:
            return self.fn.ops.int_mul(self.u32, a, b)
        return self.scalars.binary("mul", a, b)

    def scale(self, x: Id, factor: float) -> Id:
        return self.scalars.scalar("mul", x, factor)

    def shift(self, x: Id, amount: float) -> Id:
        return self.scalars.scalar("add", x, amount)

    def glsl(self, name: str, *args: Id) -> Id:
        return self.scalars.glsl(name, *args)

    def fma(self, a: Id, b: Id, c: Id) -> Id:
        """a b + c rounded once (tcnn's fmaf)."""
        return self.glsl("Fma", a, b, c)

    def product(self, factors: Sequence[Id]) -> Id:
        """factors[0] factors[1] ..., multiplied left to right."""
        result = factors[0]
        for factor in factors[1:]:
            result = self.mul(result, factor)
        return result

    def total(self, terms: Sequence[Id]) -> Id:
        """terms[0] + terms[1] + ..., added left to right."""
        result = terms[0]
        for term in terms[1:]:
            result = self.add(result, term)
        return result

    # ----- uint32 ---------------------------------------------------------------------------------------------------

    def uint(self, value: int) -> Id:
        return self.m.constant(self.u32, value)

    def xor(self, a: Id, b: Id) -> Id:
        return self.fn.ops.bitwise_xor(self.u32, a, b)

    def modulo(self, a: Id, size: int) -> Id:
        return self.fn.ops.uint_mod(self.u32, a, self.uint(size))

    def to_float(self, value: Id) -> Id:
        """A u32 as float32."""
        return self.fn.ops.uint_to_float(self.f32, value)

    def cell(self, floor: Id) -> Id:
        """A float32 whole number as tcnn's uint32 cell: converted to int32 (clamped to its range first, where tcnn's
        conversion is undefined) and taken as uint32, so a negative cell wraps to 2^32 + cell."""
        above = self.fn.ops.float_at_least(self.boolean, floor, self.constant(INT32_LIMIT))
        signed = self.fn.ops.float_to_int(self.i32, self.glsl("FMax", floor, self.constant(-INT32_LIMIT)))
        wrapped = self.fn.ops.bitcast(self.u32, signed)
        return self.fn.ops.select(self.u32, above, self.uint(int(INT32_LIMIT) - 1), wrapped)

    # ----- private arrays -------------------------------------------------------------------------------------------

    def array(self, size: int) -> Id:
        """A Function-storage array of `size` float32 (what a loop writes at computed positions)."""
        return self.fn.variable(self.m.type_array(self.f32, self.uint(size)))

    def element(self, array: Id, index: Id) -> Id:
        return self.fn.ops.access_chain(self.m.type_pointer("Function", self.f32), array, index)

    def store(self, pointer: Id, value: Id) -> None:
        self.fn.ops.store(pointer, value)

    def load(self, pointer: Id) -> Id:
        return self.fn.ops.load(self.f32, pointer)
