"""Training on the portable target: plain SPIR-V on any Vulkan 1.3 device, float32 throughout.

The step kernel reads its weights straight from the flat float32 working copy the optimizer writes (the fixed
constants of the input stage follow the parameters in the same buffer), and the weight-gradient kernels sum each
parameter's products over chunks of `CHUNK` samples in sample order, then the chunks in order: no atomics, so a step
is deterministic.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.layouts.pack import MATRIX_ALIGNMENT, WeightImage, align_up, pack
from coopnn.backends.portable.target import PortableTarget
from coopnn.shaders.training.gradients import partial_sum_shader, tape_gradient_shader
from coopnn.train.gpu.session import KernelTrainingSession

# Samples a weight-gradient invocation sums before the chunks are added: the batch is summed by as many invocations
# as there are parameters times chunks. One invocation per parameter over the whole batch took 26.5 of a 27.5 ms step
# of mlp_3_64x2_3 at 2^18 on the H100 (4611 invocations; `bench/results/*-2026-11-27-training-all-methods.md`).
CHUNK = 1024


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
    optimizer_adds_partials = True  # no step is skipped (`skip_nonfinite` is off), so nothing waits on their check

    def partial_chunks(self, capacity: int) -> int:
        return -(-capacity // CHUNK)

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
        return [tape_gradient_shader(self.layout, self.tape, CHUNK), partial_sum_shader()]

    def weights_buffer(self):
        return self.weight_buffer

    def gradient_products(self, batch: int, count: int) -> tuple[list, int]:
        from coopnn.runtime.vk.commands import Dispatch

        products, product_kernel = self.gradient_shaders[0], self.gradient_kernels[0]
        chunks = -(-batch // CHUNK)
        push = products.pack_push(count=self.layout.size, batch=batch, capacity=self.capacity)
        return [Dispatch(product_kernel, (self.tape_buffer, self.partials), push,
                         (product_kernel.group_count_for(self.layout.size), chunks, 1))], chunks
