"""Float16 blocks: float16 pairs (`float16_pairs`, its buffer, copies and widening) where two vertices of two
features that are neighbours along the grid's first dimension go into one f16vec4 atomic on the aligned block of
four elements holding the first, the second's values in it where the second is there too (the CoherentPrime hash and
the dense index put it there about half the time), and in an f16vec2 atomic of their own where it is not: a quarter
fewer atomics. Grids of other feature counts, or whose copies would not start on a whole block, add vertex by vertex
as float16 pairs do."""

from __future__ import annotations

from coopnn.backends.coopvec.table_atomics.float16_pairs import Float16Pairs, contended_elements
from coopnn.shaders.spirv.ops import Ops
from coopnn.shaders.training.shader import buffer_view


class Float16Blocks(Float16Pairs):
    name = "float16_blocks"

    def neighbour_adds(self, emitter, binding: int, start: int, encoding):
        """Neighbours in one block (the module's rule), where every copy starts on a whole block: element counts
        multiples of 4."""
        shared = contended_elements(encoding)
        if encoding.n_features_per_level != 2 or encoding.n_parameters % 4 or shared % 4:
            return None
        m, frame, ops = emitter.m, emitter.frame, Ops(emitter.fn)
        quad, pair, u32 = m.type_vector(emitter.f16, 4), m.type_vector(emitter.f16, 2), frame.u32
        blocks = buffer_view(frame, binding, quad, writable=True, name="table_gradient_blocks", stride=8)
        scope, relaxed = m.enum_constant("Scope", "Device"), m.enum_constant("MemorySemantics", "Relaxed")
        copy_shift = self._copy_shift(emitter, encoding.n_parameters, shared) if shared else None
        zero, two = emitter.forms.constant("f32", 0.0), frame.uint(2)

        def in_upper_half(element):
            return ops.int_not_equal(emitter.boolean, ops.bitwise_and(u32, element, two), frame.zero)

        def add_neighbours(first, values, other, other_values, level) -> None:
            if (level.offset + level.size) * 2 <= shared:
                first, other = ops.int_add(u32, first, copy_shift), ops.int_add(u32, other, copy_shift)
            block = ops.shift_right(u32, first, two)
            together = ops.int_equal(emitter.boolean, ops.shift_right(u32, other, two), block)
            first_upper, other_upper = in_upper_half(first), in_upper_half(other)
            lanes = []
            for upper in (False, True):
                mine = first_upper if upper else ops.logical_not(emitter.boolean, first_upper)
                theirs = ops.logical_and(emitter.boolean, together, other_upper if upper
                                         else ops.logical_not(emitter.boolean, other_upper))
                lanes += [ops.float_add(emitter.f32, ops.select(emitter.f32, mine, v, zero),
                                        ops.select(emitter.f32, theirs, o, zero))
                          for v, o in zip(values, other_values)]
            halves = [ops.float_convert(emitter.f16, lane) for lane in lanes]
            pointer = ops.access_chain(m.type_pointer("StorageBuffer", quad), blocks, frame.zero, block)
            ops.atomic_float_add(quad, pointer, scope, relaxed, ops.construct(quad, *halves))
            with emitter.fn.if_(ops.logical_not(emitter.boolean, together)):
                ops.atomic_float_add(pair, frame.element_pointer(binding, ops.shift_right(u32, other, frame.uint(1)),
                                                                 pair), scope, relaxed,
                                     ops.construct(pair, *[ops.float_convert(emitter.f16, o) for o in other_values]))

        return add_neighbours


METHOD = Float16Blocks()
