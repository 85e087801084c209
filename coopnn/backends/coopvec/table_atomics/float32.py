"""Float32 atomics (VK_EXT_shader_atomic_float's OpAtomicFAddEXT): the step kernel adds a grid's gradient straight
into the table's part of the float32 gradient, as the portable step kernel does."""

from __future__ import annotations

from coopnn.backends.coopvec.table_atomics import TableAtomics
from coopnn.shaders.targets.encodings.grid import SCATTER_FEATURES, float32_atomic_adds


class Float32Atomics(TableAtomics):
    name = "float32"
    features = SCATTER_FEATURES

    def element_type(self, emitter):
        return emitter.f32, 4

    def adds(self, emitter, binding: int, start: int, encoding):
        return float32_atomic_adds(emitter.frame, binding, start)


METHOD = Float32Atomics()
