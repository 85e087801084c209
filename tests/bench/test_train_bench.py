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
        wall, gpu = runner.fit(rng.uniform(-1, 1, (512, 3)).astype(np.float32),
                               rng.uniform(0, 1, (512, 3)).astype(np.float32), 6, 128)
    finally:
        runner.close()
    assert 0 < gpu <= wall
