"""Where a benchmark ran: date, host, the Vulkan device and driver, and the versions of everything measured.

Results files are named after the device and the date, so that results from different machines sit side by side.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import platform
import re
import subprocess
from pathlib import Path

import numpy as np

from coopnn.errors import BackendUnavailableError


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _vulkan() -> dict:
    try:
        from coopnn.runtime.executable import chosen_device

        info = chosen_device(None)
    except BackendUnavailableError as e:
        return {"available": False, "reason": str(e)}
    cv = info.cooperative_vector
    return {"available": True, "device": info.name, "device_type": info.device_type, "vendor": info.vendor,
            "driver": f"{info.driver_name} {info.driver_version_text}".strip(),
            "api": ".".join(map(str, info.api_version)),
            "cooperative_vector": bool(cv is not None and cv.cooperative_vector)}


def _torch() -> dict | None:
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    record = {"version": torch.__version__, "cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
    if record["cuda_available"]:
        record["cuda_device"] = torch.cuda.get_device_name(0)
    return record


def _onnxruntime() -> dict | None:
    if importlib.util.find_spec("onnxruntime") is None:
        return None
    import onnxruntime

    return {"version": onnxruntime.__version__, "providers": onnxruntime.get_available_providers()}


# Names the commit measured where the tree was copied: a copy's git history, if it has one, may be older than its files.
COMMIT_ENV = "COOPNN_COMMIT"


def source_commit() -> str:
    """COOPNN_COMMIT where set, else the short hash of the checkout's HEAD, else "unknown"."""
    if os.environ.get(COMMIT_ENV):
        return os.environ[COMMIT_ENV]
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        done = None
    if done is not None and done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip()
    return "unknown"


def describe_environment() -> dict:
    import coopnn

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "coopnn": coopnn.__version__,
        "commit": source_commit(),
        "vulkan": _vulkan(),
        "torch": _torch(),
        "onnxruntime": _onnxruntime(),
    }


def device_name(environment: dict) -> str:
    """The accelerator the results are about: the Vulkan device, else PyTorch's CUDA device, else the CPU."""
    if environment["vulkan"]["available"]:
        return environment["vulkan"]["device"]
    torch = environment["torch"] or {}
    return torch.get("cuda_device") or environment["cpu"]


def driver(environment: dict) -> str:
    if environment["vulkan"]["available"]:
        return environment["vulkan"]["driver"]
    torch = environment["torch"] or {}
    return f"CUDA {torch['cuda']}" if torch.get("cuda_available") else "none"


def results_stem(environment: dict) -> str:
    """`<device>-<date>`, e.g. nvidia-h100-80gb-hbm3-2026-11-22."""
    slug = re.sub(r"[^a-z0-9]+", "-", device_name(environment).lower()).strip("-")
    return f"{slug}-{environment['date'][:10]}"
