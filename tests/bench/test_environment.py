"""Where a benchmark ran, and the results file name made from it."""

from __future__ import annotations

from coopnn.bench.environment import describe_environment, device_name, driver, results_stem


def _env(vulkan=None, torch=None):
    return {"date": "2026-11-22T10:00:00+00:00", "cpu": "AMD EPYC 9654",
            "vulkan": vulkan or {"available": False, "reason": "no loader"}, "torch": torch}


def test_vulkan_device_first():
    env = _env({"available": True, "device": "NVIDIA H100 80GB HBM3", "driver": "NVIDIA 580.159"},
               {"cuda_available": True, "cuda_device": "NVIDIA H100 80GB HBM3", "cuda": "13.0"})
    assert device_name(env) == "NVIDIA H100 80GB HBM3" and driver(env) == "NVIDIA 580.159"
    assert results_stem(env) == "nvidia-h100-80gb-hbm3-2026-11-22"


def test_cuda_device_without_vulkan():
    env = _env(torch={"cuda_available": True, "cuda_device": "NVIDIA A100-SXM4-80GB", "cuda": "12.4"})
    assert device_name(env) == "NVIDIA A100-SXM4-80GB" and driver(env) == "CUDA 12.4"


def test_cpu_only():
    env = _env()
    assert device_name(env) == "AMD EPYC 9654" and driver(env) == "none"
    assert results_stem(env) == "amd-epyc-9654-2026-11-22"


def test_describe_environment_here():
    env = describe_environment()
    assert env["cpu_count"] >= 1 and env["coopnn"] and env["numpy"]
    assert env["vulkan"]["available"] in (True, False)
    assert device_name(env)


def test_the_commit_comes_from_the_environment_else_from_git(monkeypatch):
    from coopnn.bench import environment

    monkeypatch.setenv(environment.COMMIT_ENV, "abc1234")
    assert environment.source_commit() == "abc1234"  # a copied tree's git history may be older than its files
    monkeypatch.delenv(environment.COMMIT_ENV)
    assert environment.source_commit() not in ("abc1234", "")

    def no_git(*args, **kwargs):
        raise OSError("no git")

    monkeypatch.setattr(environment.subprocess, "run", no_git)
    assert environment.source_commit() == "unknown"
