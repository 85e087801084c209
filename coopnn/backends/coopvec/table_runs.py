"""Runs of consecutive float16 table elements read in one access (`InferenceOptions.vector_table_reads`): a grid
vertex's 2 or 4 features as one 4- or 8-byte load instead of one 2-byte load each.

The weight buffer (binding 0, float16 elements) is declared a second time as an array of float16 vectors of the run's
length, so that a run starting at a multiple of its length is one element there; the encoding writer only asks for
such runs (`EncodingWriter.read_run`). Other lengths, and entries not aligned to a run, are read element by element.
"""

from __future__ import annotations

VECTOR_RUNS = (2, 4)  # run lengths read as one vector: 4 and 8 bytes


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
