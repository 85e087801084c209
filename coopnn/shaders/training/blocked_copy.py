"""`blocked_copy_shader`: the blocked float16 copy of the weights (`ParameterLayout.block_index`) made from a
row-major float16 working copy written from outside the optimizer (a `coopnn.torch` module's parameters), where the
optimizer writes both itself. Bindings 0 working (f16), 1 block index (u32, one per element), 2 blocked (f16,
written); push `count`; one invocation an element: blocked[index[i]] = working[i]. A copy command with a region per
16-element run did the same, but a coopnn.torch step with it took 0.3-0.4 ms longer on the H200 than with this kernel
(bench/results/nvidia-h200-2026-12-03-16b6b8a-torch-modules.md against ...-8b3189c-torch-modules.md)."""

from __future__ import annotations

from coopnn.shaders.targets.base import Binary, push_constant_block
from coopnn.shaders.training.shader import finish, load, storage_buffer, store, training_frame

WORKING, INDEX, BLOCKED = range(3)


def blocked_copy_shader() -> Binary:
    frame = training_frame(push_constant_block(("count", "u32")))
    f16 = frame.module.type_float(16)
    storage_buffer(frame, WORKING, f16, writable=False, name="working")
    storage_buffer(frame, INDEX, frame.u32, writable=False, name="block_index")
    storage_buffer(frame, BLOCKED, f16, writable=True, name="blocked")
    value = load(frame, WORKING, frame.sample, f16)
    store(frame, BLOCKED, load(frame, INDEX, frame.sample, frame.u32), value, f16)
    return finish("blocked_copy", frame, 3, frozenset({"shaderFloat16", "storageBuffer16BitAccess"}))
