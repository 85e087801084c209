"""bench/hashgrid.py on a real Vulkan backend (portable; lavapipe in CI), tiny: a training step's GPU time, the fit's
wall clock and PSNR at each checkpoint, inference, and the JSON and markdown written with the commit measured."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import ROOT
from tests.devices import vulkan_skip_reason

pytestmark = pytest.mark.vulkan


def test_quick_hashgrid_bench_on_the_portable_backend(tmp_path):
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)
    if importlib.util.find_spec("slangpy") is None:
        pytest.skip("the benchmark's image ships with slangpy, which is not installed")
    spec = importlib.util.spec_from_file_location("hashgrid_bench", ROOT / "bench" / "hashgrid.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--quick", "--backends", "portable", "--torch-device", "none", "--out", str(tmp_path)]) == 0
    [written] = tmp_path.glob("*-hashgrid.json")
    document = json.loads(written.read_text())
    assert document["side"] == 64 and document["environment"]["commit"]
    assert document["steps"]["portable"][str(1 << 10)] > 0
    checkpoints = document["fits"]["portable"]["checkpoints"]
    assert [step for step, _, _ in checkpoints] == [20, 40]
    assert all(seconds > 0 for _, seconds, _ in checkpoints) and checkpoints[1][2] > checkpoints[0][2]
    assert document["inference"]["portable"]["median"] > 0
    text = written.with_suffix(".md").read_text()
    assert text.startswith("# tiny-cuda-nn's image configuration") and "commit" in text.splitlines()[0]
    assert "| PSNR after 40 steps, dB |" in text and "PyTorch reference: left out" in text
