"""Cooperative-matrix weight gradients (`coopnn.shaders.training.coopmat_gradients`): KHR cooperative-matrix
products of the tape per chunk of samples, whose partial gradients the optimizer adds itself."""

from __future__ import annotations

from coopnn.shaders.training import coopmat_gradients
from coopnn.shaders.training.gradients import partial_sum_shader
from coopnn.train.gpu.families import GradientMethod

# The step kernel stores sample-major deltas as whole vectors, feature-major ones a component at a time, and these
# products read either: sample-major made whole steps of the two five-layer benchmark MLPs faster and of the
# three-layer one slower (bench/results/nvidia-h100-80gb-hbm3-2026-11-27-sample-major-deltas.md); four layers were
# not measured.
SAMPLE_MAJOR_DELTAS_FROM_LAYERS = 4


class CooperativeMatrixProducts(GradientMethod):
    name = "coopmat"
    optimizer_adds_partials = True  # the products flag non-finite partial gradients, so the optimizer can add them
    device_features = coopmat_gradients.FEATURES

    def delta_layout(self, session) -> str:
        if (session.step_method.samples_major_deltas
                or len(session.plan.layers) >= SAMPLE_MAJOR_DELTAS_FROM_LAYERS):
            return "samples"
        return "features"

    def shaders(self, session):
        return [coopmat_gradients.coopmat_gradient_shader(session.layout, session.tape), partial_sum_shader()]

    def partial_chunks(self, session, capacity: int) -> int:
        return coopmat_gradients.most_chunks(session.layout, capacity)

    def products(self, session, batch: int, count: int) -> tuple[list, int]:
        from coopnn.runtime.vk.commands import Dispatch

        products, product_kernel = session.gradient_shaders[0], session.gradient_kernels[0]
        tasks = coopmat_gradients.task_count(session.layout)
        chunk_tiles, chunks = coopmat_gradients.chunking(session.layout, count)
        push = products.pack_push(count=tasks * coopmat_gradients.SUBGROUP, chunk_tiles=chunk_tiles, batch=count,
                                  capacity=session.capacity, parameters=session.layout.size)
        return [Dispatch(product_kernel, (session.tape_buffer, session.partials, session.state), push,
                         (tasks, chunks, 1))], chunks


METHOD = CooperativeMatrixProducts()
