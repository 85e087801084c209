"""Sample rows through workgroup memory (`InferenceOptions.stage_rows`): the coalesced copy of a work-group's block
of input rows in, or of output rows out, and each invocation's own row read or written there.

A work-group's `group` samples are consecutive, so their rows are one block of `group * words` 16-byte words in the
storage buffer. Invocation `local` copies words `local`, `local + group`, ... (`words` of them, consecutive
invocations on consecutive words, so that one copy instruction of a subgroup reads or writes contiguous memory),
each as a cooperative vector of one word, skipping words past the batch. A barrier separates the copy from the rows'
use. Only rows that are a whole number of words are staged so (`stageable`): OpCooperativeVectorLoadNV/StoreNV take
16-byte aligned offsets, and a word then never straddles two rows; `staged_elements.py` stages the others. Every invocation of the work-group must reach the
barriers, so a kernel with a stage has no early return (`ShaderFrame(bounds_check=False)`): invocations past the
batch compute on whatever the stage holds and store nothing.
"""

from __future__ import annotations

from coopnn.errors import CompileError

WORD_BYTES = 16
# the workgroup memory NVIDIA's Vulkan drivers give a compute shader (maxComputeSharedMemorySize)
WORKGROUP_MEMORY_LIMIT = 48 * 1024


def stageable(features: int, itemsize: int) -> bool:
    return features * itemsize % WORD_BYTES == 0


class RowStage:
    """The workgroup array holding the rows of one input or output binding of the work-group's samples; `pad`
    spaces rows one word further apart than their width, so that invocations reading their rows at once fall in
    different banks."""

    def __init__(self, emitter, binding: int, features: int, dtype: str, pad: bool):
        e = self.e = emitter
        m, frame = e.m, e.frame
        itemsize = e.binding_at[binding].itemsize
        self.binding, self.dtype, self.features = binding, dtype, features
        self.words = features * itemsize // WORD_BYTES
        self.row_stride = (self.words + int(pad)) * WORD_BYTES
        self.group = frame.workgroup_size[0]
        self.bytes = self.group * self.row_stride
        scalar = e.forms.scalar_types[dtype]
        self.array = m.global_variable("Workgroup", m.type_array(scalar, e.uint(self.bytes // itemsize)),
                                       name=f"staged_{binding}")
        self.word_type = e.forms.vector_type(dtype, WORD_BYTES // itemsize)

    def own_row(self):
        """The byte offset of this invocation's row in the stage."""
        return self.e.fn.ops.int_mul(self.e.frame.u32, self.e.local_index, self.e.uint(self.row_stride))

    def _copy(self, into_stage: bool) -> None:
        """Copy the work-group's block between the storage buffer and the stage, one word per invocation a turn."""
        e, fn, u32 = self.e, self.e.fn, self.e.frame.u32
        words = self.words
        first = fn.ops.int_mul(u32, fn.ops.int_sub(u32, e.frame.sample, e.local_index), e.uint(words))
        limit = fn.ops.int_mul(u32, e.frame.push_value("count"), e.uint(words))
        storage = e.array_pointer(self.binding, self.dtype)
        for turn in range(words):
            word = fn.ops.int_add(u32, e.local_index, e.uint(turn * self.group))
            global_word = fn.ops.int_add(u32, first, word)
            staged = fn.ops.int_add(u32,
                             fn.ops.int_mul(u32, fn.ops.uint_div(u32, word, e.uint(words)),
                                     e.uint(self.row_stride)),
                             fn.ops.int_mul(u32, fn.ops.uint_mod(u32, word, e.uint(words)), e.uint(WORD_BYTES)))
            outside = fn.ops.int_mul(u32, global_word, e.uint(WORD_BYTES))
            with fn.if_(fn.ops.uint_less(e.boolean, global_word, limit)):
                source, source_offset, sink, sink_offset = ((storage, outside, self.array, staged) if into_stage else
                                                            (self.array, staged, storage, outside))
                value = fn.ops.vector_load(self.word_type, source, source_offset)
                fn.ops.vector_store(sink, sink_offset, value)

    def load(self):
        """This invocation's row (a `Held` vector of `features` components), after the block is copied in."""
        self._copy(into_stage=True)
        self.e.fn.barrier()
        vector = self.e.fn.ops.vector_load(self.e.forms.vector_type(self.dtype, self.features),
                                self.array, self.own_row())
        return self.e.forms.from_vector(self.dtype, self.features, vector)

    def store(self, held) -> None:
        """Write this invocation's row (`held`), then copy the block out."""
        self.e.fn.ops.vector_store(self.array, self.own_row(), self.e.forms.vector(held, self.dtype))
        self.e.fn.barrier()
        self._copy(into_stage=False)


def staged_bindings(bindings, options) -> set[int]:
    """The input and output bindings `options` stage, by index: rows of whole words with `stage_rows`, the others
    with `stage_elements` (`staged_elements.py`)."""
    return {b.index for b in bindings if b.role in ("input", "output")
            and (options.stage_rows if stageable(b.features, b.itemsize) else options.stage_elements)}


def check_workgroup_memory(stages, name: str) -> None:
    total = sum(s.bytes for s in stages)
    if total > WORKGROUP_MEMORY_LIMIT:
        raise CompileError(f"staging the rows of {name} takes {total} bytes of workgroup memory a work-group, more "
                           f"than the {WORKGROUP_MEMORY_LIMIT} a work-group gets: use smaller work-groups or leave "
                           f"stage_rows off")
