"""Rows that are not whole 16-byte words through workgroup memory (`InferenceOptions.stage_elements`), element by
element: a work-group's rows of `features` values are one block of `group * features` elements, which consecutive
invocations copy element by element (so that a subgroup's copy instruction covers contiguous memory, where each
invocation's own row of 6 or 12 bytes leaves a subgroup's access strided), skipping elements past the batch. Each
invocation then reads or writes its own row in the stage, unpadded. As with `staged_rows.py`, a barrier separates the
copy from the rows' use, and the kernel has no early return.
"""

from __future__ import annotations

from coopnn.backends.coopvec.staged_rows import RowStage, stageable


class ElementStage:
    """The workgroup array of one binding's rows for the work-group's samples, copied element by element."""

    def __init__(self, emitter, binding: int, features: int, dtype: str):
        e = self.e = emitter
        self.binding, self.dtype, self.features = binding, dtype, features
        self.group = e.frame.workgroup_size[0]
        self.scalar = e.forms.scalar_types[dtype]
        self.bytes = self.group * features * e.binding_at[binding].itemsize
        self.array = e.m.global_variable("Workgroup", e.m.type_array(self.scalar, e.uint(self.group * features)),
                                         name=f"staged_{binding}")

    def _staged(self, index):
        return self.e.fn.ops.access_chain(self.e.m.type_pointer("Workgroup", self.scalar), self.array, index)

    def _copy(self, into_stage: bool) -> None:
        """Copy the work-group's block between the storage buffer and the stage, an element per invocation a turn."""
        e, fn, u32 = self.e, self.e.fn, self.e.frame.u32
        first = fn.ops.int_mul(u32, fn.ops.int_sub(u32, e.frame.sample, e.local_index), e.uint(self.features))
        limit = fn.ops.int_mul(u32, e.frame.push_value("count"), e.uint(self.features))
        for turn in range(self.features):
            element = fn.ops.int_add(u32, e.local_index, e.uint(turn * self.group))
            outside = fn.ops.int_add(u32, first, element)
            with fn.if_(fn.ops.uint_less(e.boolean, outside, limit)):
                storage = e.frame.element_pointer(self.binding, outside, self.scalar)
                source, sink = (storage, self._staged(element)) if into_stage else (self._staged(element), storage)
                fn.ops.store(sink, fn.ops.load(self.scalar, source))

    def _own(self, component: int):
        e = self.e
        start = e.fn.ops.int_mul(e.frame.u32, e.local_index, e.uint(self.features))
        return self._staged(e.fn.ops.int_add(e.frame.u32, start, e.uint(component)))

    def load(self):
        """This invocation's row (a `Held` of `features` scalars), after the block is copied in."""
        self._copy(into_stage=True)
        self.e.fn.barrier()
        return self.e.forms.from_scalars(self.dtype, [self.e.fn.ops.load(self.scalar, self._own(i))
                                                      for i in range(self.features)])

    def store(self, held) -> None:
        """Write this invocation's row (`held`), then copy the block out."""
        for i, scalar in enumerate(self.e.forms.components(held, self.dtype)):
            self.e.fn.ops.store(self._own(i), scalar)
        self.e.fn.barrier()
        self._copy(into_stage=False)


def stage_for(emitter, binding, pad: bool):
    """The stage of `binding` (a `Binding`): by words where its rows are whole words, else by elements."""
    if stageable(binding.features, binding.itemsize):
        return RowStage(emitter, binding.index, binding.features, binding.dtype, pad)
    return ElementStage(emitter, binding.index, binding.features, binding.dtype)
