"""The roofline's bytes, FLOPs and bounds for the benchmark MLPs: the figures of the H200 anchors
(`../shared/gpu/h200-anchors.md`) worked out from the graphs, and the ratio of a measured time to the bound."""

from __future__ import annotations

import pytest

from coopnn.bench.models import BenchModel
from coopnn.bench.roofline import (H200, KernelWork, RooflinePeaks, inference_work, macs_per_sample, peaks_for,
                                   tape_bytes_per_sample, training_work, weight_bytes)
from tests.conftest import ROOT


def _graph(name):
    return BenchModel.load(ROOT / "models" / f"{name}.onnx").graph


@pytest.mark.parametrize("name, flops", [("mlp_3_64x2_3", 8960), ("mlp_32_64x4_16", 30720),
                                         ("mlp_64_128x4_16", 118784)])
def test_flops_a_sample_are_the_anchors(name, flops):
    assert 2 * macs_per_sample(_graph(name)) == flops


@pytest.mark.parametrize("name, tape", [("mlp_3_64x2_3", 524), ("mlp_32_64x4_16", 1120), ("mlp_64_128x4_16", 2208)])
def test_tape_bytes_a_sample_are_the_anchors(name, tape):
    assert tape_bytes_per_sample(_graph(name)) == tape


def test_inference_at_2_21_is_bound_as_the_anchors_say():
    graph = _graph("mlp_32_64x4_16")
    work = inference_work(graph, 1 << 21)
    # float32 in (32) and out (16) for every sample, the float16 weights and biases once
    assert work.bytes == (1 << 21) * 48 * 4 + weight_bytes(graph)
    assert work.flops == (1 << 21) * 30720
    assert work.bound_ms(H200) == pytest.approx(0.094, abs=0.001)
    assert work.bound_by(H200) == "memory"
    half = inference_work(graph, 1 << 21, io_itemsize=2)
    assert half.bound_ms(H200) == pytest.approx(0.081, abs=0.001)  # then the tensor cores bound it
    assert half.bound_by(H200) == "compute"


def test_mlp_64_at_2_21_is_compute_bound():
    work = inference_work(_graph("mlp_64_128x4_16"), 1 << 21)
    assert work.bound_ms(H200) == pytest.approx(0.31, abs=0.005) and work.bound_by(H200) == "compute"


def test_a_training_step_counts_the_tape_only_where_the_method_keeps_one():
    graph = _graph("mlp_32_64x4_16")
    batch = 1 << 18
    kept, none = training_work(graph, batch), training_work(graph, batch, keeps_tape=False)
    assert kept.bytes - none.bytes == 2 * batch * 1120
    assert kept.flops == none.flops == 3 * batch * 30720
    assert (kept.bytes - none.bytes) / 4.3e12 * 1e3 == pytest.approx(0.137, abs=0.001)


def test_the_ratio_and_achieved_rates_of_a_measured_row():
    work = KernelWork(bytes=4_300_000_000, flops=400_000_000_000)
    row = work.against(2.0, H200)
    assert row["bound_ms"] == pytest.approx(1.0) and row["bound_by"] == "memory"
    assert row["ratio_to_bound"] == pytest.approx(2.0)
    assert row["tb_per_s"] == pytest.approx(2.15) and row["tflop_per_s"] == pytest.approx(200.0)
    assert work.against(None, H200)["ratio_to_bound"] is None
    unknown = work.against(2.0, None)
    assert unknown["bound_ms"] is None and unknown["tb_per_s"] == pytest.approx(2.15)


def test_peaks_by_device():
    assert peaks_for("NVIDIA H200") is H200
    h100 = peaks_for("NVIDIA H100 80GB HBM3")
    assert h100.source == "datasheet" and h100.bandwidth_tbps == pytest.approx(3.35)
    assert peaks_for("llvmpipe (LLVM 15.0.6, 256 bits)") is None
    mine = RooflinePeaks(4.0, 700.0, "measured")
    assert peaks_for("NVIDIA H200", mine) is mine
