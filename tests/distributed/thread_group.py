"""An in-process `ProcessGroup`: N ranks as N threads meeting at a barrier, for data-parallel tests without
torch.distributed. `run_ranks` runs a function on every rank and returns their results in rank order, raising the
first rank's error where one fails (the barrier then breaks, so the other ranks fail instead of hanging)."""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

TIMEOUT = 60.0  # seconds a rank waits for the others at a collective before the test fails


class _Meeting:
    def __init__(self, world_size: int):
        self.barrier = threading.Barrier(world_size, timeout=TIMEOUT)
        self.slots: list[Any] = [None] * world_size


class ThreadGroup:
    def __init__(self, meeting: _Meeting, rank: int):
        self._meeting, self.rank, self.world_size = meeting, rank, len(meeting.slots)
        self.calls: list[str] = []  # the collectives this rank called, in order

    def _exchange(self, name: str, values: np.ndarray) -> list[np.ndarray]:
        self.calls.append(name)
        self._meeting.slots[self.rank] = np.array(values, copy=True)
        self._meeting.barrier.wait()
        everyone = list(self._meeting.slots)
        self._meeting.barrier.wait()  # nobody writes the next slots before every rank has read these
        return everyone

    def all_reduce_sum(self, values: np.ndarray) -> np.ndarray:
        parts = self._exchange("sum", values)
        total = parts[0].copy()
        for part in parts[1:]:
            total += part
        return total

    def all_reduce_max(self, values: np.ndarray) -> np.ndarray:
        return np.max(np.stack(self._exchange("max", values)), axis=0)

    def broadcast(self, values: np.ndarray, source: int) -> np.ndarray:
        return self._exchange("broadcast", values)[source]

    def barrier(self) -> None:
        self.calls.append("barrier")
        self._meeting.barrier.wait()


def run_ranks(world_size: int, work: Callable[[ThreadGroup], Any]) -> list[Any]:
    meeting = _Meeting(world_size)
    results: list[Any] = [None] * world_size
    errors: list[BaseException | None] = [None] * world_size

    def rank_main(rank: int) -> None:
        try:
            results[rank] = work(ThreadGroup(meeting, rank))
        except BaseException as e:
            errors[rank] = e
            meeting.barrier.abort()

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None and not isinstance(e, threading.BrokenBarrierError)), None)
    if first is not None or any(errors):
        raise first or next(e for e in errors if e is not None)
    return results
