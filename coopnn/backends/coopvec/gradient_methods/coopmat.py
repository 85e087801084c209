"""Cooperative-matrix weight gradients (`coopnn.shaders.training.coopmat_gradients`): KHR cooperative-matrix
products of the tape per chunk of samples, whose partial gradients the optimizer adds itself."""

from __future__ import annotations

from coopnn.shaders.training import coopmat_blocks, coopmat_gradients
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
        if session.tuning.deltas is not None:
            return session.tuning.deltas
        if (session.step_method.samples_major_deltas
                or len(session.plan.layers) >= SAMPLE_MAJOR_DELTAS_FROM_LAYERS):
            return "samples"
        return "features"

    def shaders(self, session):
        return [coopmat_gradients.coopmat_gradient_shader(session.layout, session.tape, session.tuning), partial_sum_shader()]

    def partial_chunks(self, session, capacity: int) -> int:
        return coopmat_blocks.most_chunks(session.layout, capacity, session.tuning)

    def products(self, session, batch: int, count: int) -> tuple[list, int]:
        return product_dispatches(session, session.gradient_shaders[0], session.gradient_kernels[0], session.tuning,
                                  count, session.partials)


def product_dispatches(session, products, kernel, tuning, count: int, partials) -> tuple[list, int]:
    """The dispatch of the products kernel (`products`, loaded as `kernel`, compiled with `tuning`) over the
    session's tape into `partials`, and its chunks."""
    from coopnn.runtime.vk.commands import Dispatch

    tasks = coopmat_blocks.task_count(session.layout, tuning)
    chunk_tiles, chunks = coopmat_blocks.chunking(session.layout, count, tuning)
    push = products.pack_push(count=tasks * coopmat_blocks.SUBGROUP * tuning.gradient_subgroups,
                              chunk_tiles=chunk_tiles, batch=count, capacity=session.capacity,
                              parameters=session.layout.layers_size)
    return [Dispatch(kernel, (session.tape_buffer, partials, session.state), push, (tasks, chunks, 1))], chunks


METHOD = CooperativeMatrixProducts()
