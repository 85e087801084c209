"""Runs of consecutive float16 table elements read in one access (`InferenceOptions.vector_table_reads`): a grid
vertex's 2 or 4 features as one 4- or 8-byte load instead of one 2-byte load each.

The weight buffer (binding 0, float16 elements) is declared a second time as an array of float16 vectors of the run's
length, so that a run starting at a multiple of its length is one element there; the encoding writer only asks for
such runs (`EncodingWriter.read_run`). Other lengths, and entries not aligned to a run, are read element by element.

Two-feature vertices that are neighbours along a grid's first dimension (`EncodingWriter.read_neighbours`) are read
as the aligned block of four elements holding the first: where the second is in it too (about half the time, for the
dense index and the CoherentPrime hash alike) that one load is all, else the second's pair is loaded apart.
"""

from __future__ import annotations

VECTOR_RUNS = (2, 4)  # run lengths read as one vector: 4 and 8 bytes
NEIGHBOUR_RUN = 2  # the run length whose neighbours are read as one block of 4


class TableRuns:
    """`read(param, first, count)` for the emitter `e` (a `CoopvecEmitter` of an inference kernel)."""

    def __init__(self, emitter):
        self.e = emitter
        self.views: dict[int, tuple[object, object]] = {}

    def view(self, count: int):
        """(vector type, variable) of the weight buffer seen as float16 vectors of `count` components."""
        if count not in self.views:
            m = self.e.m
            vector = m.type_vector(self.e.f16, count)
            block = m.type_struct([m.type_runtime_array(vector, stride=2 * count)], offsets=[0],
                                  decorations=["Block"], name=f"WeightRuns{count}")
            variable = m.global_variable("StorageBuffer", block, name=f"weight_runs_{count}",
                                         decorations=["NonWritable", ("DescriptorSet", 0), ("Binding", 0)])
            self.views[count] = (vector, variable)
        return self.views[count]

    def read(self, param: str, first, count: int) -> list:
        """Elements `first` .. `first + count - 1` (`first` a u32 id, a multiple of `count`) of the float16 vector
        entry `param`, as float32 ids."""
        e = self.e
        offset = e.packed.entry(param).offset // 2  # in elements
        if count not in VECTOR_RUNS or offset % count:
            return [e.vector_element(param, e.fn.ops.int_add(e.frame.u32, first, e.uint(f)) if f else first)
                    for f in range(count)]
        fn, u32 = e.fn, e.frame.u32
        vector, variable = self.view(count)
        index = fn.ops.int_add(u32, fn.ops.shift_right(u32, first, e.uint(count.bit_length() - 1)),
                        e.uint(offset // count))
        pointer = fn.ops.access_chain(e.m.type_pointer("StorageBuffer", vector), variable, e.frame.zero, index)
        wide = fn.ops.float_convert(e.m.type_vector(e.f32, count), fn.ops.load(vector, pointer))
        return [fn.ops.extract(e.f32, wide, f) for f in range(count)]

    def read_neighbours(self, param: str, first, other, count: int) -> tuple[list, list]:
        """The runs of `count` elements from `first` and from `other` of the entry `param` (u32 ids, multiples of
        `count`), as float32 ids: the aligned block of 2 `count` holding `first` in one load, and `other`'s run from
        it where it is there too."""
        e = self.e
        offset = e.packed.entry(param).offset // 2
        if count != NEIGHBOUR_RUN or offset % (2 * count):
            return self.read(param, first, count), self.read(param, other, count)
        fn, u32, ops = e.fn, e.frame.u32, e.fn.ops
        vector, variable = self.view(2 * count)
        block = ops.shift_right(u32, first, e.uint(2))
        pointer = fn.ops.access_chain(e.m.type_pointer("StorageBuffer", vector), variable, e.frame.zero,
                                      ops.int_add(u32, block, e.uint(offset // 4)))
        quad = ops.float_convert(e.m.type_vector(e.f32, 4), ops.load(vector, pointer))
        halves = [ops.extract(e.f32, quad, f) for f in range(4)]

        def half_of_block(start):  # the run from `start` where it is in the block: its upper or lower half
            upper = ops.int_not_equal(e.boolean, ops.bitwise_and(u32, start, e.uint(2)), e.frame.zero)
            return [ops.select(e.f32, upper, halves[2 + f], halves[f]) for f in range(2)]

        pair_type = e.m.type_vector(e.f32, 2)
        held = fn.variable(pair_type)
        # by its own position: the two vertices may be one entry (a wrapped or colliding index)
        ops.store(held, ops.construct(pair_type, *half_of_block(other)))
        apart = ops.int_not_equal(e.boolean, ops.shift_right(u32, other, e.uint(2)), block)
        with fn.if_(apart):
            ops.store(held, ops.construct(pair_type, *self.read(param, other, count)))
        theirs = ops.load(pair_type, held)
        return half_of_block(first), [ops.extract(e.f32, theirs, f) for f in range(2)]
