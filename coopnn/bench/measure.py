"""Timing one runner on one model: warm-up, repeated runs at each batch size, statistics, and a time budget.

Every timed run yields the host time of the whole call (uploads and downloads included) and, where the runner has a
GPU clock, the GPU time of its work. A budget keeps slow runners (the numpy reference, lavapipe on a CPU) from
holding up a suite: past `seconds_per_batch` of runs a batch takes fewer runs (never fewer than `min_runs`), and a
batch whose single run is projected, from the largest batch measured so far, to exceed `max_run_seconds` is skipped.
Both cases are noted in the result, never silent.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from coopnn.bench.runners import Runner


@dataclass(frozen=True)
class Budget:
    """How many runs, and how much time a runner may spend. The defaults let the full suite (8 models, 3 batches up
    to 2^21, CPU runners included) finish in minutes on a 16-core GPU machine while GPU runners get all 30 runs."""

    runs: int = 30  # timed runs per batch
    warmup: int = 3  # untimed runs before them (at least 1: the first run at a size allocates or captures)
    min_runs: int = 5  # never fewer timed runs than this, whatever the budget
    seconds_per_batch: float = 6.0  # timed runs stop being added past this
    max_run_seconds: float = 1.0  # a batch projected to take longer per run is skipped


@dataclass(frozen=True)
class Stats:
    median: float
    min: float
    p90: float

    @classmethod
    def of(cls, values: list[float]) -> "Stats":
        a = np.asarray(values, np.float64)
        return cls(float(np.median(a)), float(a.min()), float(np.percentile(a, 90)))


@dataclass(frozen=True)
class BatchTiming:
    batch: int
    status: str  # "measured" or "skipped"
    note: str = ""
    runs: int = 0
    warmup: int = 0
    host_ms: Stats | None = None
    gpu_ms: Stats | None = None  # None when the runner has no GPU clock


def timed_run(runner: Runner, feeds: Mapping[str, np.ndarray]) -> tuple[float, float | None, dict[str, np.ndarray]]:
    """Host milliseconds of one `run()`, the runner's GPU milliseconds, and its outputs."""
    start = time.perf_counter()
    outputs, gpu_ms = runner.run(feeds)
    return (time.perf_counter() - start) * 1e3, gpu_ms, outputs


def measure_batch(runner: Runner, feeds: Mapping[str, np.ndarray], budget: Budget) -> BatchTiming:
    batch = next(iter(feeds.values())).shape[0]
    # The first run at a new size may allocate or capture, so the cost of a run is judged by the fastest warm-up run;
    # slow runners get fewer warm-up runs too (at most a quarter of what the budget affords).
    warm = [timed_run(runner, feeds)[0]]

    def affordable() -> int:
        return int(budget.seconds_per_batch * 1e3 // max(min(warm), 1e-3))

    while len(warm) < budget.warmup and len(warm) <= affordable() // 4:
        warm.append(timed_run(runner, feeds)[0])
    runs = max(budget.min_runs, min(budget.runs, affordable()))
    host, gpu = [], []
    # a collection in the middle of a run would be charged to that run
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            host_ms, gpu_ms, _ = timed_run(runner, feeds)
            host.append(host_ms)
            gpu.append(gpu_ms)
    finally:
        gc.enable()
    note = f"runs cut to {runs} by the {budget.seconds_per_batch:g} s budget per batch" if runs < budget.runs else ""
    gpu_stats = None if any(g is None for g in gpu) else Stats.of(gpu)
    return BatchTiming(batch, "measured", note, runs, len(warm), Stats.of(host), gpu_stats)


def measure_batches(runner: Runner, batches: list[int], feeds_for: Callable[[int], Mapping[str, np.ndarray]],
                    budget: Budget, on_batch: Callable[[int], None] = lambda batch: None) -> list[BatchTiming]:
    """Each batch in ascending order; `feeds_for(batch)` gives the inputs and `on_batch(batch)` is told of each."""
    results: list[BatchTiming] = []
    largest: BatchTiming | None = None
    for batch in sorted(batches):
        projected_s = None if largest is None else largest.host_ms.median / 1e3 * batch / largest.batch
        if projected_s is not None and projected_s > budget.max_run_seconds:
            results.append(BatchTiming(batch, "skipped", f"skipped: one run would take about {projected_s:.2g} s "
                                                         f"(limit {budget.max_run_seconds:g} s)"))
        else:
            largest = measure_batch(runner, feeds_for(batch), budget)
            results.append(largest)
        on_batch(batch)
    return results
