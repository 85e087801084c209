"""Cooperative-vector weight gradients (`coopnn.backends.coopvec.coopvec_gradients`): matrix-vector products of
the tape per row and chunk of samples, the chunks' partial gradients added by `partial_sum_shader`."""

from __future__ import annotations

from coopnn.backends.coopvec import coopvec_gradients
from coopnn.shaders.training.gradients import partial_sum_shader
from coopnn.train.gpu.families import GradientMethod


class CooperativeVectorProducts(GradientMethod):
    name = "coopvec"
    device_features = coopvec_gradients.FEATURES

    def shaders(self, session):
        return [coopvec_gradients.coopvec_gradient_shader(session.layout, session.tape), partial_sum_shader()]

    def create_buffers(self, session) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        ones = coopvec_gradients.ones_matrix()
        session.ones = session.context.create_buffer(ones.nbytes, HostAccess.NONE)
        session.ones.upload(ones)

    def partial_chunks(self, session, capacity: int) -> int:
        return -(-capacity // coopvec_gradients.CHUNK)

    def products(self, session, batch: int, count: int) -> tuple[list, int]:
        from coopnn.runtime.vk.commands import Dispatch

        products, product_kernel = session.gradient_shaders[0], session.gradient_kernels[0]
        chunks = -(-count // coopvec_gradients.CHUNK)
        rows = coopvec_gradients.row_starts(session.layout)[-1]
        push = products.pack_push(count=rows, batch=count, capacity=session.capacity,
                                  parameters=session.layout.layers_size)
        return [Dispatch(product_kernel, (session.tape_buffer, session.partials, session.ones), push,
                         (product_kernel.group_count_for(rows), chunks, 1))], chunks


METHOD = CooperativeVectorProducts()
