"""Timing loop: statistics, warm-up, the budget that cuts runs, and batches skipped by projection (fake runners)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from coopnn.bench.measure import Budget, Stats, measure_batch, measure_batches


class SleepyRunner:
    """Sleeps `seconds_per_sample` per sample; reports that as GPU time when `gpu`; records every call's batch."""

    def __init__(self, seconds_per_sample: float, gpu: bool = True):
        self.seconds_per_sample = seconds_per_sample
        self.gpu = gpu
        self.calls: list[int] = []

    def run(self, feeds):
        batch = feeds["x"].shape[0]
        self.calls.append(batch)
        time.sleep(batch * self.seconds_per_sample)
        return {"y": feeds["x"] * 2}, batch * self.seconds_per_sample * 1e3 if self.gpu else None

    def close(self):
        pass


def feeds(batch: int) -> dict[str, np.ndarray]:
    return {"x": np.zeros((batch, 2), np.float32)}


def test_stats_median_min_p90():
    s = Stats.of([4.0, 1.0, 3.0, 2.0, 10.0])
    assert (s.median, s.min) == (3.0, 1.0)
    assert s.p90 == pytest.approx(7.6)


def test_runs_and_warmup_within_budget():
    runner = SleepyRunner(0.0, gpu=True)
    timing = measure_batch(runner, feeds(4), Budget(runs=5, warmup=2, min_runs=1, seconds_per_batch=10))
    assert (timing.status, timing.runs, timing.warmup, timing.note) == ("measured", 5, 2, "")
    assert len(runner.calls) == 7
    assert timing.gpu_ms is not None and timing.host_ms.min <= timing.host_ms.median <= timing.host_ms.p90


def test_slow_runner_gets_fewer_runs_with_a_note():
    runner = SleepyRunner(0.02 / 10)  # 20 ms per run of 10 samples
    timing = measure_batch(runner, feeds(10), Budget(runs=30, warmup=3, min_runs=3, seconds_per_batch=0.1))
    assert 3 <= timing.runs < 30
    assert timing.warmup < 3  # warm-up shrinks with the budget too
    assert "runs cut to" in timing.note and "0.1 s budget" in timing.note


def test_min_runs_hold_even_past_the_budget():
    timing = measure_batch(SleepyRunner(0.01), feeds(2), Budget(runs=30, warmup=3, min_runs=2, seconds_per_batch=0))
    assert timing.runs == 2


def test_no_gpu_clock_means_no_gpu_stats():
    timing = measure_batch(SleepyRunner(0.0, gpu=False), feeds(3), Budget(runs=2, warmup=1))
    assert timing.gpu_ms is None and timing.host_ms is not None


def test_batch_projected_past_the_limit_is_skipped_and_never_run():
    runner = SleepyRunner(1e-4)  # 10 ms at 100 samples, so about 1 s at 10000
    seen = []
    timings = measure_batches(runner, [10000, 100], feeds, Budget(runs=2, warmup=1, max_run_seconds=0.2),
                              on_batch=seen.append)
    assert [t.batch for t in timings] == [100, 10000] and seen == [100, 10000]
    assert timings[0].status == "measured"
    assert timings[1].status == "skipped" and timings[1].runs == 0 and "limit 0.2 s" in timings[1].note
    assert 10000 not in runner.calls
