"""The end-to-end measurement on a Vulkan device (lavapipe in CI), tiny: every row and table is produced; numpy-only
models are refused with the reason. It checks the harness, never speed."""

from __future__ import annotations

import pytest

from coopnn.bench import end_to_end
from coopnn.errors import CoopnnError
from tests.conftest import ROOT
from tests.devices import vulkan_skip_reason

MLP = ROOT / "models" / "mlp_3_64x2_3.onnx"


def test_rows_tables_and_files(tmp_path, monkeypatch):
    if vulkan_skip_reason():
        pytest.skip(vulkan_skip_reason())
    monkeypatch.setattr(end_to_end, "runs_for", lambda batch: 2)
    document = end_to_end.measure([MLP], [6], backend="portable", torch=False, thread_calls=2)
    row = document["rows"][0]
    assert row["model"] == "mlp_3_64x2_3" and row["backend"] == "portable" and row["chunks"] == 1
    assert row["run_ms"] > 0 and row["floor_ms"] > 0 and row["gpu_ms"] is not None
    assert set(document["threads"]["mlp_3_64x2_3"]) == {"1", "2", "4", "8"}
    text = end_to_end.write(document, tmp_path).read_text()
    assert "| mlp_3_64x2_3 | 2^6 |" in text and "One model shared by threads" in text
    assert list(tmp_path.glob("*-host-path.json"))


def test_a_model_on_numpy_is_refused_with_the_reason():
    with pytest.raises(CoopnnError, match="times the Vulkan host path; mlp_3_64x2_3 runs on numpy"):
        end_to_end.measure([MLP], [6], backend="numpy", torch=False)
