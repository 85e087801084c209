"""bench/torch_modules.py without a GPU: tiny-cuda-nn's figures read from the anchors file, and the report."""

from __future__ import annotations

import importlib.util

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("torch_modules", ROOT / "bench" / "torch_modules.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_tcnn_figures_come_from_the_anchors_file():
    anchors = bench.tcnn_anchors()
    assert set(anchors[("mlp_32_64x4_16", 1 << 18)]) == {"infer fused", "infer JIT", "train fused", "train JIT"}
    assert set(anchors[("mlp_64_128x4_16", 1 << 16)]) == {"train fused", "train JIT"}
    assert {model for model, _ in anchors} == set(bench.MODELS)
    assert anchors[("image_hashgrid", 1 << 16)] == {"train fused": 0.216, "train JIT": 0.135}


def test_the_report_has_a_row_per_model_and_batch():
    environment = {"vulkan": {"available": True, "device": "NVIDIA H200", "driver": "580"}, "torch": {"version": "2"},
                   "date": "2026-12-02T00:00:00+00:00", "coopnn": "0"}
    row = {"model": "mlp_32_64x4_16", "batch": 1 << 14, "forward_ms": 0.1, "forward_wall_ms": 0.2,
           "after_update_ms": 0.12, "amp_forward_ms": 0.05, "step_ms": 0.4, "amp_step_ms": 0.3, "host_refreshes": 1,
           "input_gradient_step_ms": 0.5,
           "tcnn": {"infer fused": 0.0137, "infer JIT": 0.013}}
    text = bench.markdown({"environment": environment, "calls": 5, "rows": [row]})
    assert ("| mlp_32_64x4_16 | 2^14 | 0.100 | 0.200 | 0.120 | 0.050 | 0.400 |  |  | 0.500 | 0.300 | 0.750 | "
            "0.014 / 0.013 |  |" in text)
    refused = {**row, "model": "image_hashgrid", "tcnn": {}, "step_refused": "no gradient in the tables"}
    del refused["step_ms"], refused["input_gradient_step_ms"]
    text = bench.markdown({"environment": environment, "calls": 5, "rows": [row, refused]})
    assert "| image_hashgrid | 2^14 | 0.100 | 0.200 | 0.120 | 0.050 |  |  |  |  | 0.300 |  |  |  |" in text
    assert text.endswith("image_hashgrid: the step is refused: no gradient in the tables\n")
