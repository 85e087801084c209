"""A hand-made results document for the report and plot tests: an H100 with coopvec, numpy and the PyTorch CUDA
baseline measured, onnxruntime-cuda unavailable, numpy's largest batch skipped."""

from __future__ import annotations

import pytest

from coopnn.bench.report import comparisons
from coopnn.bench.roofline import KernelWork, peaks_for


def _batch(batch, host, gpu=None, status="measured", note=""):
    if status != "measured":
        return {"batch": batch, "status": status, "note": note, "runs": 0, "warmup": 0, "host_ms": None,
                "gpu_ms": None, "time_source": None, "samples_per_s": None, "host_samples_per_s": None,
                "tflops": None, "fraction_of_fp16_peak": None, "fraction_of_bandwidth_bound": None}
    seconds = (gpu or host) / 1e3
    return {"batch": batch, "status": status, "note": note, "runs": 30, "warmup": 3,
            "host_ms": {"median": host, "min": host, "p90": host},
            "gpu_ms": None if gpu is None else {"median": gpu, "min": gpu * 0.9, "p90": gpu * 1.1},
            "time_source": "host" if gpu is None else "gpu", "samples_per_s": batch / seconds,
            "host_samples_per_s": batch / (host / 1e3), "tflops": batch / seconds * 30720 / 1e12,
            "fraction_of_fp16_peak": 0.25, "fraction_of_bandwidth_bound": 0.5,
            "roofline": KernelWork(batch * 48 * 4, batch * 30720).against(gpu or host, peaks_for("H100 80GB HBM3"))}


def _result(runner, kind, batches, status="ok", reason=""):
    return {"model": "mlp", "runner": runner, "kind": kind, "precision": "fp16", "status": status,
            "reason": reason, "first_call_ms": {"cold": 120.0, "warm": 8.0} if status == "ok" else None,
            "max_abs_error": 1e-3 if status == "ok" else None, "max_abs_reference": 0.5 if status == "ok" else None,
            "batches": batches}


@pytest.fixture
def document():
    doc = {
        "environment": {"device": "NVIDIA H100 80GB HBM3", "driver": "NVIDIA 580.159", "date": "2026-11-22T10:00:00",
                        "cpu": "x", "cpu_count": 16, "coopnn": "0.1.0", "python": "3.12", "numpy": "2",
                        "torch": {"version": "2.11", "cuda": "13.0"}, "onnxruntime": None},
        "peaks": {"device": "NVIDIA H100 80GB HBM3", "label": "H100 SXM", "fp16_dense_tflops": 989.4,
                  "memory_bandwidth_gbs": 3350.0, "match": "H100 80GB HBM3"},
        "settings": {"batches": [16384, 2097152], "runs": 30, "warmup": 3, "seconds_per_batch": 5.0,
                     "weights": "fp16", "first_call_batch": 256},
        "models": [{"name": "mlp", "parameters": 10, "flops_per_sample": 30720, "io_bytes_per_sample": 192,
                    "bandwidth_bound_samples_per_s": 1.7e10, "compute_bound_samples_per_s": 3.2e10}],
        "runners": [{"name": "coopvec", "available": True, "reason": "", "kind": "coopnn"},
                    {"name": "numpy", "available": True, "reason": "", "kind": "coopnn"},
                    {"name": "torch-cuda-fp16", "available": True, "reason": "", "kind": "baseline"},
                    {"name": "onnxruntime-cuda", "available": False, "reason": "no CUDA provider",
                     "kind": "baseline"}],
        "results": [
            _result("coopvec", "coopnn", [_batch(16384, 1.0, 0.01), _batch(2097152, 100.0, 0.2)]),
            _result("numpy", "coopnn", [_batch(16384, 40.0),
                                        _batch(2097152, None, status="skipped", note="skipped: too slow")]),
            _result("torch-cuda-fp16", "baseline", [_batch(16384, 2.0, 0.04), _batch(2097152, 120.0, 1.6)]),
            _result("onnxruntime-cuda", "baseline", [], status="unavailable", reason="no CUDA provider"),
        ],
    }
    doc["comparisons"] = comparisons(doc)
    return doc
