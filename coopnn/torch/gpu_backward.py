"""`GpuBackward`: a `coopnn.torch` module's backward pass with nothing through the host: the input and the upstream
gradient go in, and the gradients come out, in memory Vulkan and CUDA share, ordered against the caller's stream on
the GPU as the forward pass's bridge orders its run (`coopnn.interop.cuda_bridge`).

On the caller's stream: the float16 mirror of the parameters refreshed where torch changed them and the session's
weights are float16 (one torch operation), the input and the upstream gradient copied into a slot's shared buffers,
and a signal of the slot's `inputs_ready` timeline. On the Vulkan queue: one submission that waits for it, takes the
shared buffers from the external queue family, runs `backward_steps.BackwardSteps` (the parameters copied into the
session's weights where they changed, the step, the gradients copied out), hands the buffers back and signals the
`done` timeline. On the caller's stream again: a wait for `done`, after which the gradients are torch tensors viewing
pooled shared buffers (`coopnn.interop.output_pool`), so the parameters' gradient becomes `params.grad` as it is.

A submission is recorded once per slot, batch, buffers and whether it refreshes the weights, and submitted again
after (`Recording`); a slot is reused once its previous submission finished, the only host wait, SLOTS calls behind.
The session's per-sample buffers grow with the batch: the host then waits for every submission, and records anew.
"""

from __future__ import annotations

import collections

from coopnn.interop import tensors
from coopnn.interop.cuda_driver import cuda_driver
from coopnn.interop.output_pool import OutputPool
from coopnn.interop.shared_objects import SharedBuffer, SharedTimeline, capacity
from coopnn.interop.slot import QUEUE_FAMILY_EXTERNAL, ownership_barriers
from coopnn.runtime.vk.commands import Recorded
from coopnn.runtime.vk.loader import load_vulkan
from coopnn.runtime.vk.recording import Recording
from coopnn.torch.backward_steps import BackwardBuffers, BackwardSteps

vk = load_vulkan()
ffi, lib = vk.ffi, vk.lib
SLOTS = 2
# Recordings kept (each with its own lane): both slots with and without a refresh of the weights, for two batches.
RECORDINGS = 8
ALL_ACCESS = vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT


def _ownership(buffers, family: int, to_vulkan: bool) -> Recorded:
    """Hands `buffers` from CUDA to the queue family `family` (`to_vulkan`) or back."""
    def record(cmd) -> None:
        source, destination = (QUEUE_FAMILY_EXTERNAL, family) if to_vulkan else (family, QUEUE_FAMILY_EXTERNAL)
        transfers = ownership_barriers(buffers, source, destination, 0 if to_vulkan else ALL_ACCESS,
                                       ALL_ACCESS if to_vulkan else 0)
        lib.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0,
                                 0, ffi.NULL, len(buffers), transfers, 0, ffi.NULL)

    return Recorded(record)


class _Slot:
    """One backward pass that can be in flight: its `inputs_ready` timeline, its input and upstream buffers, and the
    recording it last submitted."""

    def __init__(self, context, driver):
        self.context, self.driver = context, driver
        self.inputs_ready = SharedTimeline(context, driver)
        self.buffers: list[SharedBuffer | None] = [None, None]
        self.recording: Recording | None = None

    def wait(self) -> None:
        if self.recording is not None:
            self.recording.finish()
            self.recording = None

    def buffer(self, index: int, nbytes: int) -> SharedBuffer:
        """Buffer `index` (0: input, 1: upstream gradient), grown to `nbytes`; once the slot has waited."""
        buffer = self.buffers[index]
        if buffer is None or buffer.size < nbytes:
            if buffer is not None:
                buffer.release_cuda()
                buffer.release_vulkan()
            self.buffers[index] = buffer = SharedBuffer(
                self.context, self.driver, capacity(nbytes, self.context.info.limits.max_storage_buffer_range))
        return buffer

    def release(self) -> None:
        for buffer in self.buffers:
            if buffer is not None:
                buffer.release_cuda()
                buffer.release_vulkan()
        self.inputs_ready.release_cuda()
        self.inputs_ready.release_vulkan()


class GpuBackward:
    """Backward passes of `session` for a module whose parameters are `master` (`MasterWeights`), on CUDA tensors;
    made and used with nothing else holding the session."""

    def __init__(self, session, master, input_name: str):
        self.session = session
        self.master = master
        self.steps = BackwardSteps(session, master.layout, input_name)
        self.weights = master.mirror_buffer if session.working_dtype == "f16" else master.buffer
        self.driver = cuda_driver()
        self.cuda_context = self.driver.primary_context(master.ordinal)
        self.device = master.ordinal
        context = session.context
        self.recordings: collections.OrderedDict[tuple, Recording] = collections.OrderedDict()
        self.last_gradient_pointer: int | None = None  # where the last pass's parameter gradient is, for tests
        self._next = 0
        self._synced: int | None = None  # the parameters' version the session's weights hold
        with self.driver.current(self.cuda_context):
            self.done = SharedTimeline(context, self.driver)
            self.slots = [_Slot(context, self.driver) for _ in range(SLOTS)]
        self.pool = OutputPool(context, self.driver, self.cuda_context, context.info.limits.max_storage_buffer_range)
        session.books.sync()

    @staticmethod
    def reason_unavailable(session, master) -> str | None:
        """Why backward passes of `session` cannot run here for `master`'s module, or None."""
        if not session.steps_take_cuda_arrays:
            return "the training device shares no memory with CUDA"
        if session.context.shared_context is not master.scope.shared_context:
            return "the training session runs on another Vulkan context than the module's parameters"
        if session.working_dtype == "f16" and master.mirror is None:
            return "the session reads float16 weights and the module keeps no float16 mirror"
        return None

    def run(self, x, upstream, version: int, input_gradient: bool):
        """(the gradient in `params`, the gradient in `x` or None) for `x` and `upstream` (CUDA tensors) with the
        parameters as of `version`, ready on the current stream."""
        session = self.session
        x_rows = tensors.as_cuda_input("x", x, tuple(x.shape[1:]), "f32")
        dy_rows = tensors.as_cuda_input("upstream gradient", upstream, tuple(upstream.shape[1:]), "f32")
        batch, stream = x_rows.rows, x_rows.stream
        with self.driver.current(self.cuda_context):
            if session.invocations(batch) > session.capacity:
                self._forget_recordings()  # the buffers they bind are made anew
                session._ensure_capacity(batch)
            refresh = version != self._synced
            if refresh and self.weights is self.master.mirror_buffer:
                self.master.refresh_mirror()
            slot = self.slots[self._next]
            self._next = (self._next + 1) % SLOTS
            slot.wait()
            shared = [slot.buffer(0, batch * x_rows.row_bytes), slot.buffer(1, batch * dy_rows.row_bytes)]
            for buffer, given in zip(shared, (x_rows, dy_rows)):
                self.driver.copy_rows(buffer.pointer, given.pointer, given.row_bytes, batch, given.pitch, stream)
            slot.inputs_ready.value += 1
            self.driver.signal(slot.inputs_ready.args, slot.inputs_ready.value, stream)
            self.pool.reclaim()
            shared.append(self.pool.lend(self.steps.gradient_bytes, stream, True))
            if input_gradient:
                shared.append(self.pool.lend(batch * self.steps.row_bytes()[2], stream, True))
            recording = self._recording(slot, batch, shared, refresh)
            recording.submit(wait=(slot.inputs_ready.handle, slot.inputs_ready.value), signal=self.done)
            slot.recording = recording
            self._synced = version
            self.driver.wait(self.done.args, self.done.value, stream)
            return self._outputs(shared, batch, stream, input_gradient, x.dtype)

    def _outputs(self, shared, batch: int, stream: int, input_gradient: bool, dtype):
        size = self.master.layout.size
        self.last_gradient_pointer = shared[2].pointer
        grad = tensors.wrap_output(self.pool.output(shared[2], (size,), "<f4", stream), "torch", self.device,
                                   stream, False)
        grad_x = None
        if input_gradient:
            width = self.steps.row_bytes()[2] // 4
            grad_x = tensors.wrap_output(self.pool.output(shared[3], (batch, width), "<f4", stream), "torch",
                                         self.device, stream, False)
        scale = self.session.loss_scale
        if scale != 1.0:
            grad.mul_(1.0 / scale)
            if grad_x is not None:
                grad_x.mul_(1.0 / scale)
        return grad, None if grad_x is None else grad_x.to(dtype)

    def _recording(self, slot: _Slot, batch: int, shared: list, refresh: bool) -> Recording:
        session = self.session
        key = (id(slot), batch, refresh, tuple(b.serial for b in shared), tuple(b.serial for b in session.io.values()))
        recording = self.recordings.pop(key, None)
        if recording is None:
            acquired = shared + ([self.weights] if refresh else [])
            buffers = BackwardBuffers(*shared[:3], shared[3] if len(shared) > 3 else None,
                                      self.weights if refresh else None)
            family = session.context.device.queue_family
            steps = [_ownership(acquired, family, True), *self.steps.commands(buffers, batch),
                     _ownership(acquired, family, False)]
            recording = Recording(session.context, steps, uploads={session.state: (0, session.state.size)})
        self.recordings[key] = recording
        while len(self.recordings) > RECORDINGS:
            oldest = self.recordings.pop(next(iter(self.recordings)))
            self._destroy(oldest)
        return recording

    def _destroy(self, recording: Recording) -> None:
        recording.finish_all()
        for slot in self.slots:
            if slot.recording is recording:
                slot.recording = None
        recording.destroy()

    def _forget_recordings(self) -> None:
        for recording in self.recordings.values():
            self._destroy(recording)
        self.recordings.clear()

    def close(self) -> None:
        """Wait for every submission, then free what this owns (gradients still viewed keep their memory)."""
        self._forget_recordings()
        with self.driver.current(self.cuda_context):
            self.driver.synchronize()
            for slot in self.slots:
                slot.release()
            self.done.release_cuda()
            self.pool.close()
        self.done.release_vulkan()
