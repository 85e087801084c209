"""Training on the portable target: plain SPIR-V on any Vulkan 1.3 device, float32 throughout.

The step kernel reads its weights straight from the flat float32 working copy the optimizer writes (the fixed
constants of the input stage follow the parameters in the same buffer), and the weight-gradient kernel sums each
parameter's products over the batch in sample order: no atomics, so a step is deterministic.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.layouts.pack import MATRIX_ALIGNMENT, WeightImage, align_up, pack
from coopnn.backends.portable.target import PortableTarget
from coopnn.shaders.training.gradients import tape_gradient_shader
from coopnn.train.gpu.session import KernelTrainingSession

def flat_manifest(program, layout) -> WeightImage:
    """The program's constants in one float32 buffer: the trainable parameters at their flat offsets, the fixed
    constants after them."""
    entries = layout.entries(FP32)
    fixed_names = [p.name for p in program.params_of("matrix", "vector") if p.name not in entries]
    fixed = pack({name: program.constants[name] for name in fixed_names},
                 {p.name: p.role for p in program.params_of("matrix", "vector")}, FP32)
    start = align_up(layout.size * FP32.storage.itemsize, MATRIX_ALIGNMENT)
    entries.update({name: dataclasses.replace(entry, offset=start + entry.offset)
                    for name, entry in fixed.entries.items()})
    data = bytearray(start) + fixed.data
    return WeightImage(bytes(data), entries)


class PortableTrainingSession(KernelTrainingSession):
    def compile_step(self):
        self.manifest = flat_manifest(self.program, self.layout)
        return PortableTarget().compile(self.program, FP32, 64, packed=self.manifest)

    def create_weights(self) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        self.weight_buffer = self.context.create_buffer(len(self.manifest.data), HostAccess.NONE)
        self.weight_buffer.upload(np.frombuffer(self.manifest.data, np.uint8))

    def sync_weights(self) -> None:
        self.weight_buffer.upload(self.master.download(np.float32, self.layout.size))

    def make_gradient_shaders(self):
        return [tape_gradient_shader(self.layout, self.tape)]

    def weights_buffer(self):
        return self.weight_buffer

    def gradient_steps(self, batch: int, count: int) -> list:
        from coopnn.runtime.vk.commands import Dispatch

        push = self.gradient_shaders[0].pack_push(count=self.layout.size, batch=batch, capacity=self.capacity)
        kernel = self.gradient_kernels[0]
        return [Dispatch(kernel, (self.tape_buffer, self.gradient, self.state), push,
                         kernel.group_count_for(self.layout.size))]
