"""Soak (lavapipe, validation layer on): one model called from 8 threads while 4 other processes load and run
models on the same cache folder. Every result equals the single-threaded one, and nothing grows: Vulkan objects, open
file descriptors, host memory. CI runs 2,000 calls; the `slow` variant runs 10,000."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import coopnn
from coopnn.disk_cache import CACHE_DIR_ENV
from tests.conftest import ROOT

pytestmark = pytest.mark.vulkan
MODEL = ROOT / "models" / "mlp_32_64x4_16.onnx"
THREADS, PROCESSES = 8, 4
RSS_GROWTH_BYTES = 32 << 20  # allowed after the warm-up: allocator noise, never a per-call leak
PROCESS_SCRIPT = """
import sys, numpy as np, coopnn
for call in range(int(sys.argv[1])):
    name = ["mlp_3_64x2_3", "mlp_32_64x4_16"][call % 2]
    with coopnn.load(f"models/{name}.onnx", backend="portable") as model:
        model.run(np.ones((33, model.inputs[0].shape[1]), np.float32))
"""


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _soak(calls: int, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    processes = [subprocess.Popen([sys.executable, "-c", PROCESS_SCRIPT, str(max(2, calls // 400))], cwd=ROOT,
                                  env={**os.environ}, stderr=subprocess.PIPE, text=True) for _ in range(PROCESSES)]
    with coopnn.load(MODEL, backend="portable") as model:
        inputs = [np.random.default_rng(t).uniform(-1, 1, (1 + 37 * t, 32)).astype(np.float32) for t in range(THREADS)]
        expected = [model.run(x) for x in inputs]
        context = model._executable.context
        failures = []

        def work(t: int, calls_per_thread: int) -> None:
            try:
                for call in range(calls_per_thread):
                    if not np.array_equal(model.run(inputs[t]), expected[t]):
                        failures.append(f"thread {t}, call {call}: wrong results")
                        return
            except Exception as exc:  # noqa: BLE001 - reported below with the thread that saw it
                failures.append(f"thread {t}: {type(exc).__name__}: {exc}")

        def threaded(calls_per_thread: int) -> None:
            threads = [threading.Thread(target=work, args=(t, calls_per_thread)) for t in range(THREADS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

        threaded(8)  # warm-up: the slot pool, copy threads and descriptor sets reach the sizes 8 threads need
        before = (context.live_objects(), _open_fds(), _rss_bytes())
        threaded(calls // THREADS)
        after = (context.live_objects(), _open_fds(), _rss_bytes())
        assert failures == []
        assert after[0] == before[0], "Vulkan objects grew"
        assert after[1] <= before[1], "file descriptors grew"
        assert after[2] - before[2] < RSS_GROWTH_BYTES, f"host memory grew by {(after[2] - before[2]) >> 20} MiB"
        assert model.device_messages == []
    for process in processes:
        _, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stderr


def test_soak(tmp_path, monkeypatch):
    _soak(2000, tmp_path, monkeypatch)


@pytest.mark.slow
def test_soak_full(tmp_path, monkeypatch):
    _soak(10_000, tmp_path, monkeypatch)
