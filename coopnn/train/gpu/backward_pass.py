"""A backward pass alone on a `KernelTrainingSession`: given the network's input and the gradient of some loss in
its output (the upstream gradient), the gradients of that loss in every parameter and, where the step kernel writes
it, in the network's input. What `coopnn.torch`'s autograd backward runs.

The session trains with the `UpstreamGradient` loss, whose derivative in the prediction is its target, so the step
kernel's backward pass starts from the upstream gradient as it is; the weight-gradient kernels sum it into the
session's gradient (scaled by the loss scale, which is divided out here); no optimizer runs. The step program writes
the input's gradient into its INPUT_GRADIENT output (`step_program`); a step kernel compiled from another program
(the tiled and fused kernels) has no such output, and input gradients are refused there by name.
`backward` brings the gradients to the host; `backward_commands` are the same commands for a caller that records
them into a submission of its own and keeps the gradients on the GPU (`coopnn.torch.backward_steps`).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from coopnn.errors import CompileError
from coopnn.interop.tensors import rows_of
from coopnn.train.gpu.flat_parameters import unflatten
from coopnn.train.gpu.step_program import INPUT_GRADIENT


def writes_input_gradient(session) -> bool:
    """Whether the session's step kernel writes the gradient in the network's input."""
    return any(b.name == INPUT_GRADIENT for b in session.binary.bindings)


def backward_commands(session, batch: int, count: int) -> list:
    """The step kernel's and the weight-gradient kernels' commands on the batch in the session's inputs (`count`
    invocations for `batch` samples), the gradients left in `session.gradient` and the input's in
    `input_gradient_buffer`; no step end runs to clear the status word the gradient reductions may set, so the last
    command does."""
    return (session._forward_backward(batch, count) + session.gradient_steps(batch, count)
            + [session.fill_zero(session.state, size=4)])


def input_gradient_buffer(session):
    """The buffer the step kernel writes the gradient in the network's input into (float32 rows)."""
    return session.io[next(b.index for b in session.binary.bindings if b.name == INPUT_GRADIENT)]


def refuse_input_gradients(session) -> None:
    """CompileError unless the session's step kernel writes the gradient in the network's input."""
    if not writes_input_gradient(session):
        raise CompileError(f"the {session.step_method.name!r} step kernel does not write gradients in the network's "
                           f"input (an input stage, such as an encoding, stands before the first layer, or the kernel "
                           f"is not compiled from the step program); train with step='coopvec' or leave the input "
                           f"without requires_grad")


def backward(session, feeds: Mapping[str, Any], upstream: Any,
             input_gradient: bool) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """(the loss's gradient in every parameter by name, its gradient in the input [batch, features] or None) for the
    inputs `feeds` and the upstream gradient `upstream` [batch, outputs] (host, device or CUDA arrays), through the
    host; the input's only with `input_gradient`."""
    if input_gradient:
        refuse_input_gradients(session)
    batch = rows_of(upstream)
    session.books.sync()
    count, _ = session._write_batch(feeds, {session.plan.output: upstream}, batch)
    session.last_gpu_ms = session.context.run(backward_commands(session, batch, count), session._losses(batch)[1])
    scale = np.float32(session.loss_scale)
    raw = session.gradient.download(np.float32, session.layout.size) / scale
    gradients = unflatten(session.layout, session.plan, raw)
    if not input_gradient:
        return gradients, None
    width = session.plan.layers[0].cols
    rows = input_gradient_buffer(session).download(np.float32, batch * width).reshape(batch, width) / scale
    return gradients, rows
