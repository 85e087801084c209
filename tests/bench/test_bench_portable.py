"""The harness on a real Vulkan backend (portable; lavapipe in CI): GPU times from timestamp queries, first calls
with a private pipeline cache that leaves the user's alone."""

from __future__ import annotations

import os

import pytest

from coopnn.bench.caches import DRIVER_SHADER_CACHE_SWITCHES
from coopnn.bench.measure import Budget
from coopnn.bench.runners import select_runners
from coopnn.bench.suite import Settings, run_suite
from tests.conftest import ROOT
from tests.devices import vulkan_skip_reason

pytestmark = pytest.mark.vulkan


@pytest.fixture(autouse=True)
def need_vulkan():
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)


def test_portable_suite_has_gpu_times_and_first_calls(monkeypatch, tmp_path):
    for name in DRIVER_SHADER_CACHE_SWITCHES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COOPNN_CACHE_DIR", str(tmp_path / "user-cache"))
    settings = Settings(batches=(64, 256), weights="fp16", first_call_batch=32,
                        budget=Budget(runs=3, warmup=1, min_runs=1, seconds_per_batch=0.5, max_run_seconds=5))
    document = run_suite([ROOT / "models" / "nerf_skip_two_heads.onnx"], select_runners("portable"), settings)
    [result] = document["results"]
    assert result["status"] == "ok", result["reason"]
    assert result["first_call_ms"]["cold"] > 0 and result["first_call_ms"]["warm"] > 0
    assert result["max_abs_error"] < 5e-3  # fp16 weights against the float32 reference
    for record in result["batches"]:
        assert record["time_source"] == "gpu" and record["gpu_ms"]["min"] > 0
        assert record["gpu_ms"]["median"] <= record["host_ms"]["median"]
    assert document["environment"]["vulkan"]["available"] and document["environment"]["driver"]
    assert os.environ["COOPNN_CACHE_DIR"] == str(tmp_path / "user-cache")
    assert not (tmp_path / "user-cache").exists()
