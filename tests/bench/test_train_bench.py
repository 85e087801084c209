"""The training benchmark script on a real Vulkan backend (portable; lavapipe in CI): it measures whole steps with GPU
times, the step's parts and steps on device arrays, and writes its JSON and markdown."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tests.devices import vulkan_skip_reason

pytestmark = pytest.mark.vulkan


def test_quick_training_bench_on_the_portable_backend(tmp_path):
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_bench", ROOT / "bench" / "train.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--quick", "--models", "mlp_3_64x2_3", "--runners", "portable", "--out", str(tmp_path)]) == 0
    [written] = tmp_path.glob("*-training.json")
    document = json.loads(written.read_text())
    [result] = document["results"]
    assert result["status"] == "measured" and result["runner"] == "coopnn portable"
    assert result["gpu_ms"]["median"] > 0 and result["samples_per_s"] > 0
    assert 0 < result["phases"]["step_kernel_ms"] < result["gpu_ms"]["median"]
    assert result["resident_host_ms"]["median"] > 0  # steps on coopnn device arrays, as Trainer.step takes them
    assert written.with_suffix(".md").read_text().startswith("# Training step")


def test_the_device_resident_fit_measurement_reports_wall_and_gpu_time():
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)
    import numpy as np

    import coopnn
    from coopnn.bench.training import CoopnnTrainingRunner

    graph = coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx", backend="numpy").graph
    runner = CoopnnTrainingRunner(graph, "portable")
    try:
        rng = np.random.default_rng(0)
        fit = runner.fit(rng.uniform(-1, 1, (512, 3)).astype(np.float32),
                         rng.uniform(0, 1, (512, 3)).astype(np.float32), 6, 128)
        assert runner.trainer.steps == 6  # a whole Trainer.fit
    finally:
        runner.close()
    assert 0 < fit.gpu_ms <= fit.wall_ms


def test_the_warm_up_runs_until_the_step_time_settles(monkeypatch):
    from coopnn.bench import training

    tick = 1 / 64  # seconds a step takes on the fake clock (exact in binary)
    clock = [0.0]
    monkeypatch.setattr(training.time, "perf_counter", lambda: clock[0])

    def stepper(times):
        calls = []

        def step():
            clock[0] += tick
            calls.append(1)
            return times(len(calls) - 1)
        return step, calls

    # each window 10% slower than the last for 100 steps, then steady: settled at the second steady window
    step, calls = stepper(lambda n: 1.0 + 0.1 * (n // 10) if n < 100 else 1.0)
    assert training.warm_up(step, 0.5) == (120 * tick, True) and len(calls) == 120
    # steady from the start: stops at the first window boundary past the minimum
    step, calls = stepper(lambda n: 1.0)
    assert training.warm_up(step, 0.5) == (40 * tick, True) and len(calls) == 40
    # never steady: gives up at the limit
    step, calls = stepper(lambda n: 1.0 + n)
    assert training.warm_up(step, 0.5) == (training.WARMUP_LIMIT * 0.5, False)
    # no GPU clock: the host time counts; no warm-up asked: none done
    step, calls = stepper(lambda n: None)
    assert training.warm_up(step, 0.5) == (40 * tick, True)
    step, calls = stepper(lambda n: 1.0)
    assert training.warm_up(step, 0) == (0.0, False) and calls == []
