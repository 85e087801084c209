"""The fused step kernel (`coopnn.backends.coopvec.tiled_fused`): the tiled kernel forming the weight gradients'
partial sums itself, with no tape. Only the fused gradient method runs it, so `step=` does not name it."""

from __future__ import annotations

from coopnn.backends.coopvec import tiled_fused
from coopnn.backends.coopvec.step_kernels.tiled import TiledStep, device_subgroups
from coopnn.errors import CompileError


class FusedStep(TiledStep):
    name = "fused"
    selectable = False

    def unsupported_reason(self, session) -> str | None:
        shared_memory = session.context.info.limits.max_compute_shared_memory_size
        return tiled_fused.unsupported_reason(session.plan, session.loss_function, shared_memory,
                                              device_subgroups(session)[0])

    def compile(self, session):
        reason = self.unsupported_reason(session)
        if reason is not None:
            raise CompileError(f"gradients='fused' cannot train {session.plan.graph.name!r}: {reason}; use "
                               f"gradients='coopmat' or 'auto'")
        return tiled_fused.fused_step_shader(session.program, session.plan, session.loss_function, session.layout,
                                             session.context.info.limits.max_compute_shared_memory_size,
                                             *device_subgroups(session))

    def groups(self, session, count: int) -> int:
        return tiled_fused.groups_for(count, session.binary.workgroup_size[0])


KERNEL = FusedStep()
