"""A model under benchmark: work per sample and generated inputs."""

from __future__ import annotations

import numpy as np

from coopnn.bench.models import BenchModel
from tests.conftest import ROOT


def test_work_per_sample_of_a_benchmark_mlp():
    model = BenchModel.load(ROOT / "models" / "mlp_32_64x4_16.onnx")
    assert model.name == "mlp_32_64x4_16"
    macs = 32 * 64 + 3 * 64 * 64 + 64 * 16
    assert model.flops_per_sample == 2 * macs  # fused ReLUs and biases are not counted
    assert model.io_bytes_per_sample == (32 + 16) * 4
    assert model.parameters == macs + 4 * 64 + 16


def test_feeds_are_float32_in_range_and_seeded():
    model = BenchModel.load(ROOT / "models" / "nerf_skip_two_heads.onnx")
    feeds = model.feeds(1000, seed=3)
    assert {k: v.shape for k, v in feeds.items()} == {"xyz": (1000, 3), "view_dir": (1000, 3)}
    for v in feeds.values():
        assert v.dtype == np.float32 and v.min() >= -1 and v.max() < 1
    np.testing.assert_array_equal(feeds["xyz"], model.feeds(1000, seed=3)["xyz"])
    record = model.record()
    assert record["inputs"] == {"xyz": [3], "view_dir": [3]} and record["outputs"] == {"sigma": [1], "rgb": [3]}
