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


def measure_with_torch(copy_bytes: int = 1 << 30, size: int = 8192, repeats: int = 10) -> tuple[float, float] | None:
    """What this GPU reaches through PyTorch: (TB/s of a device-to-device copy of `copy_bytes`, counting bytes read
    and written; TFLOP/s of a `size`^3 fp16 matrix product), the best of `repeats` each after a warm-up; None without
    PyTorch or a CUDA device."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    source = torch.empty(copy_bytes, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    a = torch.randn(size, size, dtype=torch.float16, device="cuda")
    b = torch.randn(size, size, dtype=torch.float16, device="cuda")

    def best_seconds(work) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for i in range(repeats + 2):
            start.record()
            work()
            end.record()
            end.synchronize()
            if i >= 2:
                times.append(start.elapsed_time(end) / 1e3)
        return min(times)

    copy = best_seconds(lambda: target.copy_(source))
    product = best_seconds(lambda: torch.matmul(a, b))
    return 2 * copy_bytes / copy / 1e12, 2 * size ** 3 / product / 1e12
