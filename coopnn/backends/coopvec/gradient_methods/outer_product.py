"""Per-sample outer products: the per-sample step kernel accumulates each sample's outer product into TrainingOptimal
matrices, which vkCmdConvertCooperativeVectorMatrixNV turns into a row-major float16 copy before they are widened."""

from __future__ import annotations

from coopnn.backends.coopvec import outer_product
from coopnn.backends.coopvec.step_kernels.coopvec import LAYOUT


class PerSampleOuterProducts(outer_product.OuterProducts):
    def create_buffers(self, session) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        # the TrainingOptimal sums converted to row-major float16, in the flat order
        session.sums = session.context.create_buffer(session.layout.layers_size * 2, HostAccess.NONE,
                                                     device_address=True)

    def sums(self, session) -> tuple[list, object, int]:
        from coopnn.backends.coopvec.driver import repack
        from coopnn.layouts.formats.fp16 import FORMAT as FP16
        from coopnn.runtime.vk.commands import Recorded

        convert = repack(session.context, session.optimal, outer_product.by_parameter(session.accumulators,
                                                                                      session.layout),
                         session.sums, session.layout.entries(FP16, tables=False))
        return [Recorded(convert)], session.sums, 0


METHOD = PerSampleOuterProducts("outer_product", LAYOUT)
