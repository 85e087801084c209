"""bench/run.py and bench/plot.py end to end on the numpy backend, tiny: files written, PNG made later from JSON."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from coopnn.bench.caches import DRIVER_SHADER_CACHE_SWITCHES
from tests.conftest import ROOT


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def run_script(monkeypatch):
    for name in DRIVER_SHADER_CACHE_SWITCHES:
        monkeypatch.delenv(name, raising=False)
    return _script("run")


def test_suite_lists_the_benchmark_mlps_and_neural_shading_models(run_script):
    assert run_script.SUITE[:3] == ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
    for name in run_script.SUITE:
        assert (ROOT / "models" / f"{name}.onnx").is_file()


def test_quick_run_writes_json_markdown_and_plot(run_script, tmp_path, capsys):
    code = run_script.main(["--quick", "--models", "mlp_3_64x2_3,siren_sdf", "--backend", "numpy",
                            "--baseline", "none", "--batches", "16,64", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    [json_path] = tmp_path.glob("*-quick.json")
    document = json.loads(json_path.read_text())
    assert document["settings"]["runs"] == run_script.QUICK_BUDGET.runs and document["settings"]["batches"] == [16, 64]
    assert {r["model"] for r in document["results"]} == {"mlp_3_64x2_3", "siren_sdf"}
    assert json_path.with_suffix(".md").read_text().startswith("# coopnn benchmark")
    assert "siren_sdf" in out and f"wrote {json_path}" in out
    if importlib.util.find_spec("matplotlib"):
        assert json_path.with_suffix(".png").is_file()
    else:
        assert "no plot (matplotlib is not installed" in out


def test_unknown_model_is_a_one_line_error(run_script, tmp_path, capsys):
    assert run_script.main(["--quick", "--models", "nope", "--out", str(tmp_path)]) == 1
    assert "no such zoo model: nope" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_plot_script_draws_from_saved_json(run_script, tmp_path):
    pytest.importorskip("matplotlib")
    run_script.main(["--quick", "--models", "mlp_3_64x2_3", "--backend", "numpy", "--baseline", "none",
                     "--batches", "16", "--out", str(tmp_path), "--no-plot"])
    [json_path] = tmp_path.glob("*.json")
    assert not list(tmp_path.glob("*.png"))
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "plot.py"), str(json_path), "--out",
                           str(tmp_path / "later.png")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "later.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_script_reports_an_unreadable_file(tmp_path):
    pytest.importorskip("matplotlib")
    (tmp_path / "bad.json").write_text("{")
    assert _script("plot").main([str(tmp_path / "bad.json")]) == 1
