"""`coopnn bench`: the table on stdout, the JSON file, and one-line errors."""

from __future__ import annotations

import json
import warnings

import pytest

from coopnn.bench.caches import DRIVER_SHADER_CACHE_SWITCHES
from coopnn.bench.runners import select_runners
from coopnn.bench.suite import Settings, run_suite
from coopnn.cli import main
from coopnn.errors import InputError
from coopnn.layouts.formats import format_names
from tests.conftest import ROOT

MLP = str(ROOT / "models" / "mlp_32_64x4_16.onnx")


@pytest.fixture(autouse=True)
def restore_environment(monkeypatch):
    for name in DRIVER_SHADER_CACHE_SWITCHES:
        monkeypatch.delenv(name, raising=False)


def test_bench_prints_a_table_and_writes_json(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert main(["bench", MLP, "--backend", "numpy", "--batch", "2^5,128", "--runs", "2", "--warmup", "1",
                 "--weights", "fp32", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "mlp_32_64x4_16  numpy" in out and "2^5" in out and "2^7" in out and f"wrote {path}" in out
    document = json.loads(path.read_text())
    assert document["settings"]["batches"] == [32, 128] and document["settings"]["runs"] == 2
    [result] = document["results"]
    assert result["runner"] == "numpy" and result["precision"] == "fp32 weights"
    assert [b["runs"] for b in result["batches"]] == [2, 2]


def test_unknown_weights_are_a_usage_error_naming_the_formats(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", MLP, "--backend", "numpy", "--batch", "8", "--runs", "1", "--weights", "int3"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "'int3'" in err and all(name in err for name in format_names())


def test_the_suite_refuses_unknown_weights_before_measuring():
    with pytest.raises(InputError, match="unknown weight format 'int3'; supported: fp16, fp32"):
        run_suite([MLP], select_runners("numpy", "none"), Settings(batches=(8,), weights="int3"))


def test_the_default_weights_are_those_load_takes(tmp_path):
    import coopnn

    path = tmp_path / "r.json"
    assert main(["bench", MLP, "--backend", "numpy", "--batch", "8", "--runs", "1", "--json", str(path)]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with coopnn.load(MLP) as model:
            loaded = model.weights
    document = json.loads(path.read_text())
    assert document["settings"]["weights"] == "auto"
    assert document["results"][0]["precision"] == f"{loaded} weights"


def test_unknown_backend_is_a_one_line_error(capsys):
    assert main(["bench", MLP, "--backend", "cuda"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("coopnn: error: unknown backend 'cuda'") and err.count("\n") == 1


def test_nothing_selected_is_an_error(capsys):
    assert main(["bench", MLP, "--backend", "none"]) == 1
    assert "nothing to benchmark" in capsys.readouterr().err


def test_bad_batch_list_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", MLP, "--batch", "lots"])
    assert exit_info.value.code == 2 and "expected e.g. 16384,262144" in capsys.readouterr().err
