"""Shared test fixtures: the model zoo and onnxruntime, the oracle every backend is compared with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest_plugins = ["tests.devices"]

ROOT = Path(__file__).resolve().parents[1]
ZOO = sorted((ROOT / "models").glob("*.onnx"))
BENCHMARK_MLPS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
# The test extra leaves PyTorch out (754 MB); the export extra brings it, and CI installs both.
TORCH_MISSING = "PyTorch is not installed: it comes with the export extra (pip install -e '.[test,export]')"


def import_torch():
    """PyTorch, or a skip of the calling test (or module) saying where it comes from."""
    return pytest.importorskip("torch", reason=TORCH_MISSING)


def zoo_ids() -> list[str]:
    return [p.stem for p in ZOO]


def ort_run(model_path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of onnxruntime on the CPU in float32, keyed by output name."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def random_feeds(model, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs in [-1, 1] for every input of a coopnn Model, with the given batch size."""
    rng = np.random.default_rng(seed)
    return {t.name: rng.uniform(-1, 1, (batch,) + t.shape[1:]).astype(np.float32) for t in model.inputs}


@pytest.fixture(autouse=True)
def _driver_shader_caches_restored(monkeypatch):
    """The benchmark switches the drivers' shader caches off for its process; inside the test process that must
    not outlive the test that ran it, or every later test compiles its shaders cold."""
    from coopnn.bench.caches import DRIVER_SHADER_CACHE_SWITCHES

    for name in DRIVER_SHADER_CACHE_SWITCHES:
        monkeypatch.delenv(name, raising=False)  # recorded now, restored at teardown whatever the test set
