"""The tiled step kernel (`coopnn.backends.coopvec.tiled_step`): cooperative matrices over tiles of samples, reading
a blocked float16 copy of the weights (16 x 16 blocks) that the optimizer writes beside the row-major working copy
(`ParameterLayout.block_index`)."""

from __future__ import annotations

import math

from coopnn.backends.coopvec import tiled_step
from coopnn.train.gpu import tiling
from coopnn.train.gpu.families import StepKernel

# "auto" takes the tiled kernel for models of this many layers or more, where it made whole steps faster than the
# per-sample kernel on all three benchmark MLPs (bench/results/nvidia-h100-80gb-hbm3-2026-11-27-training-tiled-step-
# b262144.md, ...-b65536.md, ...-tiled-step-ablation.md); two-layer models were not measured.
AUTO_TILED_FROM_LAYERS = 3


def device_subgroups(session) -> tuple[int, int]:
    """(largest, smallest) subgroup size of the session's device."""
    subgroups = session.context.info.subgroup
    return subgroups.max_size or subgroups.size, subgroups.min_size or subgroups.size


class TiledStep(StepKernel):
    name = "tiled"
    preference = 0
    keeps_blocked_copy = True
    samples_major_deltas = True  # it stores row-major tiles of deltas

    def padded(self, width: int) -> int:
        return tiling.padded(width)

    def takes_auto(self, session) -> bool:
        """From `AUTO_TILED_FROM_LAYERS` layers, where the model fits the workgroup memory every device of this target
        has (`tiling.SHARED_MEMORY`; the device's own is checked as it compiles)."""
        return (len(session.plan.layers) >= AUTO_TILED_FROM_LAYERS and not tiling.unsupported_reason(
            session.plan, session.loss_function, tiling.SHARED_MEMORY, tuning=session.tuning))

    def unsupported_reason(self, session) -> str | None:
        shared_memory = session.context.info.limits.max_compute_shared_memory_size
        return tiling.unsupported_reason(session.plan, session.loss_function, shared_memory,
                                         device_subgroups(session)[0], session.tuning)

    def compile(self, session):
        return tiled_step.tiled_step_shader(session.program, session.plan, session.loss_function, session.layout,
                                            session.tape, session.context.info.limits.max_compute_shared_memory_size,
                                            *device_subgroups(session), session.tuning)

    def granularity(self, samples: int, binary) -> int:
        return math.lcm(samples, binary.workgroup_size[0])  # whole workgroups, no tail

    def create_weights(self, session) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        session.block_order = session.layout.block_index(tiling.MATRIX)  # also where `sync_weights` puts them
        session.block_index = session.context.create_buffer(session.block_order.nbytes, HostAccess.NONE)
        session.block_index.upload(session.block_order)
        session.blocked = session.context.create_buffer(session.layout.size * 2, HostAccess.NONE)
        session.blocked_copy_kernel = None  # (shader, kernel) of `refresh_steps`, made on its first use

    def weights_buffer(self, session):
        return session.blocked

    def refresh_steps(self, session) -> list:
        """The blocked copy rearranged from the working copy by `blocked_copy_shader`, an invocation an element."""
        from coopnn.runtime.executable import load_kernel
        from coopnn.runtime.vk.commands import Dispatch
        from coopnn.shaders.training.blocked_copy import blocked_copy_shader

        if session.blocked_copy_kernel is None:
            shader = blocked_copy_shader()
            session.blocked_copy_kernel = shader, load_kernel(session.context, shader)
        (shader, kernel), count = session.blocked_copy_kernel, session.layout.size
        return [Dispatch(kernel, (session.working, session.block_index, session.blocked),
                         shader.pack_push(count=count), kernel.group_count_for(count))]


KERNEL = TiledStep()
