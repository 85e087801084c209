"""Float16 pairs (VK_NV_shader_atomic_float16_vector): the step kernel adds a grid's gradient into a float16 buffer
of the table's own size, a vertex's features two at a time with OpAtomicFAddEXT on an f16vec2 (half the bytes of
float32 atomics, and half as many atomics at two or more features a level); a level of one feature adds its value and
a zero to the pair holding its element. Each product is rounded to float16 before it is added, as tiny-cuda-nn's half
atomics do. After the step kernel, `widen_shader` widens the sums into the table's part of the float32 gradient and
flags an infinite (overflowed) one, so dynamic loss scaling skips that step and halves the scale."""

from __future__ import annotations

from coopnn.backends.coopvec.table_atomics import TableAtomics
from coopnn.layouts.pack import align_up
from coopnn.shaders.spirv.ops import Ops
from coopnn.shaders.training.gradients import FEATURES as GRADIENT_FEATURES, widen_shader

FEATURES = frozenset({"shaderFloat16VectorAtomics", "shaderFloat16", "storageBuffer16BitAccess"}) | GRADIENT_FEATURES


class Float16Pairs(TableAtomics):
    name = "float16_pairs"
    features = FEATURES

    def element_type(self, emitter):
        return emitter.m.type_vector(emitter.f16, 2), 4

    def adds(self, emitter, binding: int, start: int):
        """The adds into pairs of the table's float16 gradient, which starts at the table's first element (so
        `start` is not added)."""
        m, frame, ops = emitter.m, emitter.frame, Ops(emitter.fn)
        m.capability("AtomicFloat16VectorNV")
        m.extension("SPV_NV_shader_atomic_fp16_vector")
        pair, u32, one = m.type_vector(emitter.f16, 2), frame.u32, frame.uint(1)
        scope, relaxed = m.enum_constant("Scope", "Device"), m.enum_constant("MemorySemantics", "Relaxed")
        zero = emitter.forms.constant("f16", 0.0)

        def add_pair(index, vector) -> None:
            ops.atomic_float_add(pair, frame.element_pointer(binding, index, pair), scope, relaxed, vector)

        def add(first, values) -> None:
            halves = [ops.float_convert(emitter.f16, value) for value in values]
            at = ops.shift_right(u32, first, one)
            if len(halves) == 1:
                odd = ops.int_equal(emitter.boolean, ops.bitwise_and(u32, first, one), one)
                add_pair(at, ops.select(pair, odd, ops.construct(pair, zero, halves[0]),
                                        ops.construct(pair, halves[0], zero)))
                return
            # 2, 4 or 8 features: the vertex's first element is even, its features whole pairs
            for k in range(0, len(halves), 2):
                add_pair(ops.int_add(u32, at, frame.uint(k // 2)) if k else at,
                         ops.construct(pair, halves[k], halves[k + 1]))

        return add

    def shaders(self, session) -> list:
        return [widen_shader()]

    def create_buffers(self, session) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        session.table_halves = session.context.create_buffer(align_up(session.layout.tables[0].size * 2, 4),
                                                             HostAccess.NONE)

    def gradient_buffer(self, session):
        return session.table_halves

    def zeroed(self, session) -> tuple:
        return session.table_halves, 0, session.table_halves.size

    def after_step(self, session) -> list:
        from coopnn.runtime.vk.commands import Dispatch

        (widen,), (kernel,), table = session.table_shaders, session.table_kernels, session.layout.tables[0]
        return [Dispatch(kernel, (session.table_halves, session.gradient, session.state),
                         widen.pack_push(count=table.size, first=0, to=table.offset),
                         kernel.group_count_for(table.size))]


METHOD = Float16Pairs()
