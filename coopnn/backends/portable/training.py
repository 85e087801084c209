"""Training on the portable target: plain SPIR-V on any Vulkan 1.3 device, float32 throughout.

The step kernel reads its weights straight from the flat float32 working copy the optimizer writes (the fixed
constants of the input stage follow the parameters in the same buffer), and the weight-gradient kernels sum each
parameter's products over chunks of `CHUNK` samples in sample order, then the chunks in order: no atomics, so a step
is deterministic. A trained grid's table follows the layers in the working copy, and its gradient is added by the
step kernel with float32 atomics (`accumulate_encoding`), so that part of a step is not.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.layouts.pack import MATRIX_ALIGNMENT, WeightImage, align_up, pack
from coopnn.backends.portable.target import PortableTarget
from coopnn.shaders.training.gradients import partial_sum_shader, tape_gradient_shader
from coopnn.train.gpu.families import GradientMethod, StepKernel
from coopnn.train.gpu.session import KernelTrainingSession

# Samples a weight-gradient invocation sums before the chunks are added: the batch is summed by as many invocations
# as there are parameters times chunks, since one invocation per parameter over the whole batch took nearly the
# whole step (bench/results/nvidia-h100-80gb-hbm3-2026-11-27-training-all-methods.md).
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


class FlatStep(StepKernel):
    """The portable target's step kernel, reading its weights from the flat float32 working copy."""

    name = "portable"

    def compile(self, session):
        session.manifest = flat_manifest(session.program, session.layout)
        return PortableTarget().compile(session.program, FP32, 64, packed=session.manifest)

    def create_weights(self, session) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        session.weight_buffer = session.context.create_buffer(len(session.manifest.data), HostAccess.NONE)
        session.weight_buffer.upload(np.frombuffer(session.manifest.data, np.uint8))

    def weights_buffer(self, session):
        return session.weight_buffer


class ChunkedTapeProducts(GradientMethod):
    """Each parameter's products summed over chunks of `CHUNK` samples of the tape, the chunks added in order."""

    name = "tape"
    optimizer_adds_partials = True  # no step is skipped (`skip_nonfinite` is off), so nothing waits on their check

    def shaders(self, session):
        return [tape_gradient_shader(session.layout, session.tape, CHUNK), partial_sum_shader()]

    def partial_chunks(self, session, capacity: int) -> int:
        return -(-capacity // CHUNK)

    def products(self, session, batch: int, count: int) -> tuple[list, int]:
        from coopnn.runtime.vk.commands import Dispatch

        products, product_kernel = session.gradient_shaders[0], session.gradient_kernels[0]
        chunks = -(-batch // CHUNK)
        count = session.layout.layers_size  # a trained grid's gradient the step kernel accumulates itself
        push = products.pack_push(count=count, batch=batch, capacity=session.capacity)
        return [Dispatch(product_kernel, (session.tape_buffer, session.partials), push,
                         (product_kernel.group_count_for(count), chunks, 1))], chunks


class PortableTrainingSession(KernelTrainingSession):
    step_method = FlatStep()
    gradient_method = ChunkedTapeProducts()

    def sync_weights(self) -> None:
        self.weight_buffer.upload(self.master.download(np.float32, self.layout.size))
