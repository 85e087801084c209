"""`Recording`: a sequence of dispatches recorded once into a command buffer of its own and submitted again as often
as wanted, for work repeated on the same buffers (runs of training steps): no per-submission recording on the host.
A sequence a submission runs `repeat` times back to back is recorded once, into a secondary command buffer the
submission executes that many times: recording a block of 16 training steps whole took 3.5-4 ms of the H100 machine's
host, which a fit spends three times over while the GPU waits (a 1,000-step fit of mlp_3_64x2_3 at 2^16 samples:
87 ms by the wall clock for 74 ms of GPU work, 2026-11-28).

Each (kernel, buffers) pair gets a descriptor set of its own (the kernels' shared cache recycles sets, which a kept
recording must not see), and push constants are fixed when recorded. Staging copies are part of the recording: the
given byte ranges of STAGED buffers are uploaded before the dispatches (the host writes their staging memory between
submissions; with DIRECT buffers it writes them in place), and the given STAGED buffers downloaded whole after. One
submission of a recording is in flight at a time: `submit` then `finish`, or `run` for both; submissions of
different recordings may be in flight together (the queue runs them in order, each after the work before it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from coopnn.runtime.vk.commands import (Dispatch, Recorded, barrier_between, commands_for, record_commands,
                                        record_sequence)
from coopnn.runtime.vk.lane import Lane, barrier
from coopnn.runtime.vk.loader import load_vulkan
from coopnn.runtime.vk.memory import Placement

if TYPE_CHECKING:
    from coopnn.runtime.vk.context import VulkanContext
    from coopnn.runtime.vk.memory import Buffer


class Recording:
    """`steps` on `context`'s queue, `repeat` times in each submission, recorded now; `uploads` maps the buffers the
    host writes before each submission to the (start, stop) bytes it writes, `downloads` names those it reads after."""

    def __init__(self, context: VulkanContext, steps: Sequence[Dispatch | Recorded],
                 uploads: Mapping[Buffer, tuple[int, int]] | None = None, downloads: Sequence[Buffer] = (),
                 repeat: int = 1):
        if repeat < 1 or not steps:
            raise ValueError(f"a recording runs a sequence of steps at least once, not {len(steps)} steps {repeat} "
                             "times")
        self._lane = Lane(context.device, context.tracker, context.queue_lock)
        self._sets: dict = {}
        try:
            commands = commands_for(context.info, steps, self._descriptor_set)
            staged = [(b, r) for b, r in (uploads or {}).items() if b.placement is Placement.STAGED]
            fetched = [(b, (0, b.size)) for b in downloads if b.placement is Placement.STAGED]
            body = self._repeated(commands, repeat)
            self._lane.use("recording", lambda cmd: record_commands(cmd, self._lane, body, staged, fetched))
        except BaseException:
            self.destroy()
            raise
        self._staged_uploads = [b for b, _ in staged]

    def _repeated(self, commands: Sequence, repeat: int):
        """What records `commands` `repeat` times in a primary command buffer: the commands themselves once, or a
        secondary command buffer holding them, executed `repeat` times with the barrier between the last command and
        the first."""
        if repeat == 1:
            return lambda cmd: record_sequence(cmd, commands)
        secondary = self._lane.secondary(lambda cmd: record_sequence(cmd, commands))
        joint = barrier_between(commands[-1], commands[0])
        execute = load_vulkan().lib.vkCmdExecuteCommands

        def body(cmd) -> None:
            for index in range(repeat):
                if index:
                    barrier(cmd, joint)
                execute(cmd, 1, secondary)

        return body

    def _descriptor_set(self, dispatch: Dispatch):
        key = (id(dispatch.kernel), tuple(b.serial for b in dispatch.buffers))
        if key not in self._sets:
            self._sets[key] = dispatch.kernel.dedicated_descriptor_set(dispatch.buffers)
        return self._sets[key].handle

    @property
    def in_flight(self) -> bool:
        return self._lane.in_flight

    def submit(self) -> None:
        """Submit (waiting first for this recording's previous submission)."""
        self._lane.wait()
        for buffer in self._staged_uploads:
            buffer.take_pending_upload()  # the recording copies the ranges the host writes
        self._lane.submit()

    def finish(self) -> float | None:
        """Wait for the last submission; the GPU time of its dispatches in ms (None without timestamps)."""
        self._lane.wait()
        return self._lane.elapsed_ms()

    def run(self) -> float | None:
        """Submit and wait; the GPU time of the dispatches in ms."""
        self.submit()
        return self.finish()

    def destroy(self) -> None:
        for descriptor_set in self._sets.values():
            descriptor_set.destroy()
        self._sets = {}
        self._lane.destroy()
