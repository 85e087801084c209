"""`Recording`: a sequence of dispatches recorded once and submitted again as often as wanted, for work repeated on
the same buffers (runs of training steps): no per-submission recording on the host.

A submission runs the sequence `repeat` times back to back. For a repeat above one the sequence is recorded once, into
a secondary command buffer that a primary executes that many times; each repeat count gets a primary of its own on
first use, kept. Recording a block of steps whole costs host time that grows with the block and that a fit would
spend while the GPU waits; a primary executing a recorded step costs microseconds a repetition
(`bench/results/nvidia-h100-80gb-hbm3-2026-11-28-training-repeated-blocks-b65536.md`).

A recording submits on `lanes` lanes (the first made with it, the others on first use), one submission in flight on
each, so that the host queues the next submission while one runs; primaries and timestamps are per lane, the descriptor
sets and the secondary shared. Each (kernel, buffers) pair gets a descriptor set of its own (the kernels' shared cache
recycles sets, which a kept recording must not see), and push constants are fixed when recorded. Staging copies are part
of every submission: the given byte ranges of STAGED buffers are uploaded before the dispatches (the host writes their
staging memory between submissions; with DIRECT buffers it writes them in place), and the given STAGED buffers
downloaded whole after. Submissions of different recordings may be in flight together too (the queue runs them in order,
each after the work before it).
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
    """`steps` on `context`'s queue (descriptor sets made now, command buffers on first use); `uploads` maps the
    buffers the host writes before each submission to the (start, stop) bytes it writes, `downloads` names those it
    reads after; `lanes` submissions may be in flight at once."""

    def __init__(self, context: VulkanContext, steps: Sequence[Dispatch | Recorded],
                 uploads: Mapping[Buffer, tuple[int, int]] | None = None, downloads: Sequence[Buffer] = (),
                 lanes: int = 1):
        if not steps or lanes < 1:
            raise ValueError(f"a recording runs a sequence of steps on a lane at least, not {len(steps)} steps on "
                             f"{lanes} lanes")
        self._context = context
        self._lanes: list[Lane | None] = [None] * lanes
        self._sets: dict = {}
        self._secondary = None
        self._submitted: set[int] = set()  # lanes with a submission to finish or finished (their timestamps written)
        try:
            self._lane(0)
            self._commands = commands_for(context.info, steps, self._descriptor_set)
        except BaseException:
            self.destroy()
            raise
        self._staged = [(b, r) for b, r in (uploads or {}).items() if b.placement is Placement.STAGED]
        self._fetched = [(b, (0, b.size)) for b in downloads if b.placement is Placement.STAGED]

    def _lane(self, index: int) -> Lane:
        lane = self._lanes[index]
        if lane is None:
            context = self._context
            lane = self._lanes[index] = Lane(context.device, context.tracker, context.queue_lock)
        return lane

    def _body(self, repeat: int):
        """What records the sequence `repeat` times in a primary command buffer: the commands themselves once, or the
        secondary command buffer holding them, executed `repeat` times with the barrier between the last command and
        the first."""
        if repeat == 1:
            return lambda cmd: record_sequence(cmd, self._commands)
        if self._secondary is None:
            self._secondary = self._lane(0).secondary(lambda cmd: record_sequence(cmd, self._commands))
        secondary, joint = self._secondary, barrier_between(self._commands[-1], self._commands[0])
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

    def in_flight(self, lane: int = 0) -> bool:
        return self._lanes[lane] is not None and self._lanes[lane].in_flight

    def submit(self, repeat: int = 1, lane: int = 0, wait: tuple[object, int] | None = None, signal=None) -> None:
        """Submit the sequence `repeat` times on lane `lane` (waiting first for that lane's previous submission);
        `wait` and `signal` are timeline semaphores shared with another API, as `Lane.submit` takes them."""
        if repeat < 1:
            raise ValueError(f"a submission runs the sequence at least once, not {repeat} times")
        chosen = self._lane(lane)
        chosen.wait()
        chosen.use(repeat, lambda cmd: record_commands(cmd, chosen, self._body(repeat), self._staged, self._fetched))
        for buffer, _ in self._staged:
            buffer.take_pending_upload()  # the recording copies the ranges the host writes
        chosen.submit(wait=wait, signal=signal)
        self._submitted.add(lane)

    def finish(self, lane: int = 0) -> float | None:
        """Wait for lane `lane`'s last submission; the GPU time of its dispatches in ms (None without timestamps)."""
        if lane not in self._submitted:
            raise ValueError(f"nothing was submitted on lane {lane}")
        chosen = self._lanes[lane]
        chosen.wait()
        return chosen.elapsed_ms()

    def finish_all(self) -> list[float | None]:
        """Wait for every submission in flight; the GPU time of each in ms, as `finish` gives it."""
        return [self.finish(index) for index in range(len(self._lanes)) if self.in_flight(index)]

    def run(self, repeat: int = 1) -> float | None:
        """Submit on the first lane and wait; the GPU time of the dispatches in ms."""
        self.submit(repeat)
        return self.finish()

    def destroy(self) -> None:
        for descriptor_set in self._sets.values():
            descriptor_set.destroy()
        self._sets = {}
        for lane in self._lanes:
            if lane is not None:
                lane.destroy()
        self._lanes = [None] * len(self._lanes)
        self._secondary = None
        self._submitted = set()
