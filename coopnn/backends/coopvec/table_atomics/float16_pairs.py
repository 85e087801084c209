"""Float16 pairs (VK_NV_shader_atomic_float16_vector): the step kernel adds a grid's gradient into a float16 buffer
of the table's own size, a vertex's features two at a time with OpAtomicFAddEXT on an f16vec2 (half the bytes of
float32 atomics, and half as many atomics at two or more features a level); a level of one feature adds its value and
a zero to the pair holding its element. Each product is rounded to float16 before it is added, as tiny-cuda-nn's half
atomics do. After the step kernel, `widen_shader` widens the sums into the table's part of the float32 gradient and
flags an infinite (overflowed) one, so dynamic loss scaling skips that step and halves the scale.

Coarse levels are contended: every sample adds into a few hundred entries, and atomics on one address take turns.
The leading levels of at most `CONTENDED_ELEMENTS` elements each (`contended_elements`) so go into `COPIES` copies,
work-group w adding into copy w mod COPIES (the first copy is the table's own buffer, the others follow it), and the
widening adds the copies (`Tuning.table_copies` may set another power of two); each copy also sums fewer terms in
float16. Alone, the float16-pair atomics of tcnn's image configuration took 0.61 ms at 2^18 on the H200, and 0.25 ms
with its six dense levels in 32 copies (0.24 in 128;
bench/results/nvidia-h200-2026-12-03-94b4281-grid-scatter-probe.md); in whole steps 32 copies beat 16, 64 and 128
(bench/results/nvidia-h200-2026-12-03-23053a8-step-stages.md).

The widening zeroes every sum it reads, so the buffer is zeroed once, when it is made, and after a step kernel that
no widening follows (`CoopvecTrainingSession.loss`), rather than by a fill before every step."""

from __future__ import annotations

from coopnn.backends.coopvec.table_atomics import TableAtomics
from coopnn.layouts.pack import align_up
from coopnn.shaders.spirv.ops import Ops
from coopnn.shaders.training.gradients import FEATURES as GRADIENT_FEATURES, widen_lanes, widen_shader

FEATURES = frozenset({"shaderFloat16VectorAtomics", "shaderFloat16", "storageBuffer16BitAccess"}) | GRADIENT_FEATURES
COPIES = 32
CONTENDED_ELEMENTS = 1 << 15  # a level of at most this many elements is contended


def contended_elements(encoding) -> int:
    """Elements of the grid's leading levels of at most CONTENDED_ELEMENTS elements each: the part in COPIES (none
    at one feature a level, whose pairs may straddle two levels)."""
    features, end = encoding.n_features_per_level, 0
    if features % 2:
        return 0
    for level in encoding.levels:
        if level.size * features > CONTENDED_ELEMENTS:
            break
        end = (level.offset + level.size) * features
    return end


def _encoding(session):
    return session.plan.tables[0].node.attrs["encoding"]


def _lanes(session) -> int:
    """Elements an invocation of the session's widening takes: as many as the table's size, place and contended
    part allow, up to 4."""
    table = session.layout.tables[0]
    return widen_lanes(table.size, table.offset, contended_elements(_encoding(session)))


class Float16Pairs(TableAtomics):
    name = "float16_pairs"
    features = FEATURES
    clears_after_step = True  # the widening zeroes the sums it reads

    def __init__(self, copies: int = COPIES):
        self.copies = copies  # of the contended levels, a power of two

    def tuned(self, tuning) -> TableAtomics:
        copies = tuning.table_copies or COPIES
        return self if copies == self.copies else Float16Pairs(copies)

    def element_type(self, emitter):
        return emitter.m.type_vector(emitter.f16, 2), 4

    def adds(self, emitter, binding: int, start: int, encoding):
        """The adds into pairs of the table's float16 gradient, which starts at the table's first element (so
        `start` is not added), a contended level's into the work-group's copy."""
        m, frame, ops = emitter.m, emitter.frame, Ops(emitter.fn)
        m.capability("AtomicFloat16VectorNV")
        m.extension("SPV_NV_shader_atomic_fp16_vector")
        pair, u32, one = m.type_vector(emitter.f16, 2), frame.u32, frame.uint(1)
        scope, relaxed = m.enum_constant("Scope", "Device"), m.enum_constant("MemorySemantics", "Relaxed")
        zero = emitter.forms.constant("f16", 0.0)

        shared = contended_elements(encoding)
        copy_shift = self._copy_shift(emitter, encoding.n_parameters, shared) if shared else None

        def add_pair(index, vector) -> None:
            ops.atomic_float_add(pair, frame.element_pointer(binding, index, pair), scope, relaxed, vector)

        def add(first, values, level) -> None:
            halves = [ops.float_convert(emitter.f16, value) for value in values]
            if (level.offset + level.size) * len(values) <= shared:
                first = ops.int_add(u32, first, copy_shift)
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

    def _copy_shift(self, emitter, table: int, shared: int):
        """Elements from the table's own copy of a contended entry to the work-group's: 0 for copy 0, else past the
        `table` elements and the copies before (even counts, so pairs stay pairs)."""
        ops, u32, frame = Ops(emitter.fn), emitter.frame.u32, emitter.frame
        group = ops.uint_div(u32, frame.sample, frame.uint(frame.workgroup_size[0]))
        copy = ops.bitwise_and(u32, group, frame.uint(self.copies - 1))
        past = ops.int_add(u32, frame.uint(table - shared), ops.int_mul(u32, copy, frame.uint(shared)))
        return ops.select(u32, ops.int_equal(emitter.boolean, copy, frame.zero), frame.zero, past)

    def shaders(self, session) -> list:
        return [widen_shader(self.copies, _lanes(session), clears=True)]

    def create_buffers(self, session) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        elements = session.layout.tables[0].size + (self.copies - 1) * contended_elements(_encoding(session))
        session.table_halves = session.context.create_buffer(align_up(elements * 2, 4), HostAccess.NONE)

    def gradient_buffer(self, session):
        return session.table_halves

    def zeroed(self, session) -> tuple:
        return session.table_halves, 0, session.table_halves.size

    def after_step(self, session) -> list:
        from coopnn.runtime.vk.commands import Dispatch

        (widen,), (kernel,), table = session.table_shaders, session.table_kernels, session.layout.tables[0]
        lanes = _lanes(session)
        push = widen.pack_push(count=table.size // lanes, first=0, to=table.offset // lanes,
                               shared=contended_elements(_encoding(session)) // lanes)
        return [Dispatch(kernel, (session.table_halves, session.gradient, session.state), push,
                         kernel.group_count_for(table.size // lanes))]


METHOD = Float16Pairs()
