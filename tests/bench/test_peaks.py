"""Known devices' peaks by name substring, and the bounds they put on a model."""

from __future__ import annotations

import pytest

from coopnn.bench.peaks import (
    bandwidth_bound_samples_per_s,
    compute_bound_samples_per_s,
    device_peak,
    peak_record,
)


def test_h100_sxm_as_its_vulkan_driver_names_it():
    peak = device_peak("NVIDIA H100 80GB HBM3")
    assert (peak.label, peak.fp16_dense_tflops, peak.memory_bandwidth_gbs) == ("H100 SXM", 989.4, 3350.0)


def test_h100_pcie_is_not_taken_for_sxm():
    assert device_peak("NVIDIA H100 PCIe").label == "H100 PCIe"


@pytest.mark.parametrize("name", ["llvmpipe (LLVM 15.0.6, 256 bits)", "", None])
def test_unknown_devices_have_no_peaks(name):
    assert device_peak(name) is None
    assert peak_record(name) == {"device": name, "label": "unknown"}


def test_record_of_a_known_device():
    record = peak_record("NVIDIA H100 80GB HBM3")
    assert record["fp16_dense_tflops"] == 989.4 and record["memory_bandwidth_gbs"] == 3350.0


def test_bounds():
    # 32 float inputs and 16 float outputs: 192 bytes per sample at 3.35 TB/s
    assert bandwidth_bound_samples_per_s(192, 3350.0) == pytest.approx(3.35e12 / 192)
    assert compute_bound_samples_per_s(30720, 989.4) == pytest.approx(989.4e12 / 30720)
