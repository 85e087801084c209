"""The commands of one backward pass of a `coopnn.torch` module on a training session, in one submission: the
module's parameters copied into the weights the step kernel reads (where torch changed them), the input and the
upstream gradient copied into the step's inputs, the step kernel and the weight-gradient kernels
(`coopnn.train.gpu.backward_pass.backward_commands`), and the gradients copied out, the parameters' into a vector
laid out as the module's `params` (`session_regions`), the input's as packed rows.

Every buffer is given (`BackwardBuffers`): `gpu_backward.GpuBackward` passes memory shared with CUDA and records the
ownership transfers around these commands; the lavapipe tests pass plain device buffers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coopnn.runtime.vk.commands import Recorded
from coopnn.runtime.vk.loader import load_vulkan
from coopnn.torch.flat_layout import FlatLayout
from coopnn.torch.session_regions import parameter_regions
from coopnn.train.gpu.backward_pass import backward_commands, input_gradient_buffer
from coopnn.train.gpu.step_program import INPUT_GRADIENT, TARGET

vk = load_vulkan()
ffi, lib = vk.ffi, vk.lib
ITEMSIZES = {"f32": 4, "f16": 2}


@dataclass(frozen=True)
class BackwardBuffers:
    """What a backward pass reads and writes: `x` and `upstream` (float32 rows), `gradient` (float32, laid out as
    the module's vector), `input_gradient` (float32 rows, or None where it is not wanted) and `weights` (the module's
    vector in the session's working dtype, or None where the session's weights are current)."""

    x: Any
    upstream: Any
    gradient: Any
    input_gradient: Any = None
    weights: Any = None


def _copies(source, destination, regions, swap: bool = False):
    """A vkCmdCopyBuffer's arguments for `regions` (module offset, session offset, bytes): module to session, or
    session to module with `swap`."""
    structs = ffi.new("VkBufferCopy[]", [{"srcOffset": s if swap else m, "dstOffset": m if swap else s, "size": n}
                                         for m, s, n in regions])
    return source.handle, destination.handle, len(regions), structs


def _recorded(*copies) -> Recorded:
    kept = list(copies)  # the structs live as long as the recording

    def record(cmd) -> None:
        for source, destination, count, regions in kept:
            lib.vkCmdCopyBuffer(cmd, source, destination, count, regions)

    return Recorded(record)


def _whole(source, destination, nbytes: int):
    return source.handle, destination.handle, 1, ffi.new("VkBufferCopy*", (0, 0, nbytes))


class BackwardSteps:
    """Backward passes of `session` (a `KernelTrainingSession` of the `UpstreamGradient` loss) for a module whose
    vector is laid out by `flat`."""

    def __init__(self, session, flat: FlatLayout, input_name: str):
        self.session = session
        self.input_name = input_name
        self.weight_regions = parameter_regions(flat, session.layout, session.plan,
                                                ITEMSIZES[session.working_dtype])
        self.gradient_regions = parameter_regions(flat, session.layout, session.plan, 4)
        self.gradient_bytes = flat.size * 4

    def row_bytes(self) -> tuple[int, int, int]:
        """Bytes of a row of the input, the upstream gradient and the input gradient (0 where the step kernel writes
        none), as the step kernel binds them (float32)."""
        sizes = {b.name: b.features * b.itemsize for b in self.session.binary.bindings}
        return sizes[self.input_name], sizes[TARGET], sizes.get(INPUT_GRADIENT, 0)

    def commands(self, buffers: BackwardBuffers, batch: int) -> list:
        """The commands of a backward pass of `batch` samples (the session's capacity made for it already)."""
        session = self.session
        count = session.invocations(batch)
        x_bytes, upstream_bytes, gradient_row_bytes = self.row_bytes()
        steps = []
        if buffers.weights is not None:
            steps += [_recorded(_copies(buffers.weights, session.working_buffer(), self.weight_regions)),
                      *session.step_method.refresh_steps(session)]
        fill = Recorded(lambda cmd: lib.vkCmdFillBuffer(cmd, buffers.gradient.handle, 0, self.gradient_bytes, 0))
        steps += [fill, _recorded(_whole(buffers.x, session.io[session._binding(self.input_name)], batch * x_bytes),
                                  _whole(buffers.upstream, session.io[session._binding(TARGET)],
                                         batch * upstream_bytes))]
        steps += backward_commands(session, batch, count)
        out = [_copies(session.gradient, buffers.gradient, self.gradient_regions, swap=True)]
        if buffers.input_gradient is not None:
            out.append(_whole(input_gradient_buffer(session), buffers.input_gradient, batch * gradient_row_bytes))
        return steps + [_recorded(*out)]
