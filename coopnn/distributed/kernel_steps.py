"""Data-parallel steps of a training session on a Vulkan device (`coopnn.train.gpu.session`).

A step is two submissions around the seam `gradient_commands` / `optimizer_commands`: the step kernel on the batch
the device draws with this rank's seed, the loss tiles and the gradient kernels; then, with the gradient (or the
partial gradients the optimizer adds) replaced by its mean over ranks and the status word (the gradient kernels'
non-finite flag) by its maximum over ranks, the optimizer, which ends the step: every rank skips the same steps and
keeps the same loss scale. The host waits for each submission, so the steps do not run back to back as a
single-process `fit`'s do.
"""

from __future__ import annotations

import numpy as np

from coopnn.distributed.group import ProcessGroup, agreed_overflow
from coopnn.distributed.gradient_transport import CudaTransport, HostTransport
from coopnn.shaders.training.step_state import STATUS


class KernelReducedSteps:
    """Averaged steps of the Vulkan training `session` across `group`: the gradient through memory shared with CUDA
    where the group sums CUDA tensors (`TorchGroup` with NCCL) and the device shares memory with CUDA, else through
    the host."""

    def __init__(self, session, group: ProcessGroup):
        self.session, self.group = session, group
        self.skipped = 0  # steps skipped on every rank because a rank's gradient overflowed
        self.transport = (CudaTransport(session.context, group) if _through_cuda(session, group)
                          else HostTransport(group))

    def upload(self, feeds, targets):
        return self.session.upload_data(feeds, targets)

    def step(self, data, step: int, batch_size: int, seed: int) -> float:
        """One step on batch `step` of `seed`, drawn on the device from `data`: this rank's loss of it."""
        session = self.session
        data.select(step % len(data.shards))
        batch = min(batch_size, data.rows)
        count = session.invocations(batch)
        session._ensure_capacity(batch)
        session.books.before(1, step)
        gradients, chunks = session.gradient_commands(batch)
        buffer, values = (session.partials, chunks * session.layout.size) if chunks else (session.gradient,
                                                                                          session.layout.size)
        session.context.run(session._forward_backward(batch, count, data, seed) + gradients
                            + self.transport.handed_out(buffer, values))
        if self._agree_on_status() and session.skip_nonfinite:
            self.skipped += 1
        self.transport.reduce(buffer, values)
        session.context.run(self.transport.taken_back(buffer, values) + session.optimizer_commands(batch, chunks),
                            session.books.downloads())
        return float(session._mean_losses(1, batch)[0])

    def _agree_on_status(self) -> bool:
        """Set the status word to its maximum over ranks: whether any rank's gradient overflowed."""
        state = self.session.state
        words = state.download(np.uint32, STATUS + 1).copy()
        overflowed = agreed_overflow(self.group, bool(words[STATUS]))
        if overflowed and not words[STATUS]:
            words[STATUS] = 1
            state.upload(words[STATUS:STATUS + 1], 4 * STATUS)
        return overflowed

    def close(self) -> None:
        self.transport.close()


def _through_cuda(session, group) -> bool:
    """Whether the gradient can go through memory shared with CUDA: a group that sums CUDA tensors, on a device
    whose memory CUDA can import."""
    from coopnn.interop.vk_export import interop_unavailable_reason

    return hasattr(group, "all_reduce_sum_cuda") and getattr(group, "backend", "") == "nccl" and \
        interop_unavailable_reason(session.context) is None
