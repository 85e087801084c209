"""The CUDA <-> Vulkan hand-off taken apart: each leg of the bridge's round trip, and the alternatives to each, timed
on empty Vulkan submissions (`bench/torch_handoff.py` reports them beside the library's calls).

Each probe runs `calls` times from an idle GPU (synchronised before each) and gives its median in µs:
  round_trip         CUDA signals a timeline, a Vulkan submission waits for it and signals back, the stream waits
                     (the bridge's hand-off with no work in it; stream time by CUDA events);
  signalled_first    the same, with the host waiting until CUDA's signal has happened before it submits, so the
                     Vulkan submission never waits for a signal still to come;
  vulkan_to_cuda     a submission that waits for nothing signals, the stream waits (stream time);
  cuda_to_vulkan     CUDA signals, a submission waits for it, the host waits for its fence (host clock);
  vulkan_alone       an empty submission and its fence (host clock);
  host_ordered       the host synchronises the stream, submits without semaphores and waits for the fence: the
                     round trip ordered by the host instead (host clock);
  memory_flag        as round_trip, but the stream waits with cuStreamWaitValue32 on a word the submission writes
                     into memory CUDA shares, instead of on the semaphore (stream time);
  torch_op           one small torch operation on the stream, for scale.
A probe the driver refuses (cuStreamWaitValue32 where stream memory operations are off) gives None.
"""

from __future__ import annotations

import statistics
import time

from coopnn.interop.cuda_driver import CudaError
from coopnn.interop.shared_objects import SharedBuffer
from coopnn.runtime.vk.lane import barrier
from coopnn.runtime.vk.loader import load_vulkan

PROBES = ("round_trip", "signalled_first", "vulkan_to_cuda", "cuda_to_vulkan", "vulkan_alone", "host_ordered",
          "memory_flag", "torch_op")


class Legs:
    """The probes on a bridge's first slot and `done` timeline (`bridge._resources`), on torch's current stream."""

    def __init__(self, torch, bridge):
        self.torch = torch
        resources = bridge._resources
        self.driver, self.done, self.slot = resources.driver, resources.done, resources.slots[0]
        self.context = resources.context
        self.cuda_context = resources.cuda_context
        self.stream = torch.cuda.current_stream()
        self.small = torch.zeros(16, device="cuda")

    def _stream_us(self, body) -> float:
        begin, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        self.slot.wait()  # a lane's fence is reset by its next submission
        self.torch.cuda.synchronize()
        begin.record(self.stream)
        body()
        end.record(self.stream)
        self.torch.cuda.synchronize()
        return begin.elapsed_time(end) * 1e3

    def _host_us(self, body) -> float:
        self.slot.wait()
        self.torch.cuda.synchronize()
        start = time.perf_counter()
        body()
        return (time.perf_counter() - start) * 1e6

    def _signal(self) -> int:
        ready = self.slot.inputs_ready
        ready.value += 1
        self.driver.signal(ready.args, ready.value, self.stream.cuda_stream)
        return ready.value

    def _empty(self) -> None:
        self.slot.lane.use("empty", lambda cmd: None)

    def round_trip(self) -> None:
        self._empty()
        self.slot.submit(self._signal(), self.done)
        self.driver.wait(self.done.args, self.done.value, self.stream.cuda_stream)

    def signalled_first(self) -> None:
        self._empty()
        value = self._signal()
        self.stream.synchronize()
        self.slot.submit(value, self.done)
        self.driver.wait(self.done.args, self.done.value, self.stream.cuda_stream)

    def vulkan_to_cuda(self) -> None:
        self._empty()
        self.slot.lane.submit(signal=self.done)
        self.driver.wait(self.done.args, self.done.value, self.stream.cuda_stream)

    def cuda_to_vulkan(self) -> None:
        self._empty()
        self.slot.lane.submit(wait=(self.slot.inputs_ready.handle, self._signal()))
        self.slot.wait()

    def vulkan_alone(self) -> None:
        self._empty()
        self.slot.lane.submit()
        self.slot.wait()

    def host_ordered(self) -> None:
        self.small.add_(1.0)
        self.stream.synchronize()
        self.vulkan_alone()

    def memory_flag(self, flag: SharedBuffer, value: int) -> None:
        vk = load_vulkan()
        cmd = self.slot.lane.begin()
        barrier(cmd, "after_previous_work")
        vk.lib.vkCmdFillBuffer(cmd, flag.handle, 0, 4, value)
        barrier(cmd, "after_previous_work")
        self.slot.lane.end()
        self.slot.lane.submit(wait=(self.slot.inputs_ready.handle, self._signal()))
        self.driver.wait_value(flag.pointer, value, self.stream.cuda_stream)

    def measure(self, calls: int) -> dict[str, float | None]:
        """Median µs of each probe over `calls` runs."""
        found: dict[str, list[float] | None] = {name: [] for name in PROBES}
        with self.driver.current(self.cuda_context):
            flag = SharedBuffer(self.context, self.driver, 4)
            vk = load_vulkan()
            self.context.submit(lambda cmd: vk.lib.vkCmdFillBuffer(cmd, flag.handle, 0, 4, 0))
            try:
                for call in range(calls):
                    found["round_trip"].append(self._stream_us(self.round_trip))
                    found["signalled_first"].append(self._stream_us(self.signalled_first))
                    found["vulkan_to_cuda"].append(self._stream_us(self.vulkan_to_cuda))
                    found["cuda_to_vulkan"].append(self._host_us(self.cuda_to_vulkan))
                    found["vulkan_alone"].append(self._host_us(self.vulkan_alone))
                    found["host_ordered"].append(self._host_us(self.host_ordered))
                    if found["memory_flag"] is not None:
                        found["memory_flag"] = self._flag_probe(found["memory_flag"], flag, call + 1)
                    found["torch_op"].append(self._stream_us(lambda: self.small.add_(1.0)))
            finally:
                self.slot.wait()
                self.torch.cuda.synchronize()
                flag.release_cuda()
                flag.release_vulkan()
        return {name: None if times is None else statistics.median(times) for name, times in found.items()}

    def _flag_probe(self, times: list[float], flag: SharedBuffer, value: int) -> list[float] | None:
        """`times` with one more memory_flag run, or None where the driver refuses stream memory operations."""
        try:
            times.append(self._stream_us(lambda: self.memory_flag(flag, value)))
        except CudaError:
            self.slot.wait()
            return None
        return times
