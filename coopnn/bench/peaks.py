"""What the hardware allows: known GPUs' fp16 dense tensor peak and memory bandwidth, and the bounds they put on a
model.

Devices are matched by a substring of the name the driver reports (most specific first); anything else is "unknown"
and its reports simply carry no reference lines. Numbers are the vendors' datasheet figures, dense (no sparsity).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class DevicePeak:
    match: str  # case-insensitive substring of the device name
    label: str
    fp16_dense_tflops: float  # tensor cores, fp16 inputs, fp32 accumulation, no sparsity
    memory_bandwidth_gbs: float  # GB/s (1e9 bytes per second)


KNOWN_DEVICES: tuple[DevicePeak, ...] = (
    DevicePeak("H100 80GB HBM3", "H100 SXM", 989.4, 3350.0),
    DevicePeak("H100 PCIe", "H100 PCIe", 756.5, 2000.0),
    DevicePeak("H200", "H200 SXM", 989.4, 4800.0),
    DevicePeak("A100-SXM4-80GB", "A100 SXM 80GB", 312.0, 2039.0),
    DevicePeak("A100-SXM4-40GB", "A100 SXM 40GB", 312.0, 1555.0),
)


def device_peak(device_name: str | None) -> DevicePeak | None:
    """The known peaks of the device called `device_name`, or None when it is not in the table."""
    name = (device_name or "").lower()
    return next((d for d in KNOWN_DEVICES if d.match.lower() in name), None)


def peak_record(device_name: str | None) -> dict:
    """The peaks as stored in a results file: the table row, or {"label": "unknown"}."""
    peak = device_peak(device_name)
    return {"device": device_name, **(asdict(peak) if peak else {"label": "unknown"})}


def bandwidth_bound_samples_per_s(io_bytes_per_sample: int, memory_bandwidth_gbs: float) -> float:
    """Samples per second when every sample's inputs are read and outputs written once at full bandwidth."""
    return memory_bandwidth_gbs * 1e9 / io_bytes_per_sample


def compute_bound_samples_per_s(flops_per_sample: int, fp16_dense_tflops: float) -> float:
    """Samples per second when every FLOP of the model runs at the tensor cores' dense fp16 peak."""
    return fp16_dense_tflops * 1e12 / flops_per_sample
