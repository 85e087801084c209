"""A tiny suite end to end on the CPU runners: every field of the results document, failures and unsupported runners
recorded rather than raised, and the document surviving a JSON round trip."""

from __future__ import annotations

import json

import pytest

from coopnn.bench.caches import DRIVER_SHADER_CACHE_SWITCHES
from coopnn.bench.measure import Budget
from coopnn.bench.report import load, save
from coopnn.bench.runners import RunnerSpec, select_runners
from coopnn.bench.suite import SCHEMA, Settings, parse_batches, run_suite
from tests.conftest import ROOT

MODELS = [ROOT / "models" / "mlp_3_64x2_3.onnx", ROOT / "models" / "radiance_cache_layernorm.onnx"]
SETTINGS = Settings(batches=(8, 64), weights="fp16", first_call_batch=16,
                    budget=Budget(runs=2, warmup=1, min_runs=1, seconds_per_batch=0.05, max_run_seconds=5))


def _broken(model, weights):
    raise RuntimeError("device lost")


BROKEN = RunnerSpec("broken", "coopnn", "always fails", None, lambda: None, lambda m, w: None, _broken)
PICKY = RunnerSpec("picky", "coopnn", "refuses every model", None, lambda: None,
                   lambda m, w: f"no {w} here", _broken)


@pytest.fixture(scope="module")
def document():
    specs = select_runners("numpy", "none") + [s for s in select_runners("none", "all") if s.name in
                                                ("torch-cpu-fp32", "onnxruntime-cpu", "torch-cuda-fp16")]
    with pytest.MonkeyPatch.context() as mp:
        for name in DRIVER_SHADER_CACHE_SWITCHES:
            mp.delenv(name, raising=False)  # run_suite sets them; give them back afterwards
        return run_suite(MODELS, specs + [BROKEN, PICKY], SETTINGS, label="test")


def test_document_top_level(document):
    assert document["schema"] == SCHEMA
    assert set(document) == {"schema", "environment", "peaks", "roofline_peaks", "settings", "models", "runners",
                             "results", "comparisons", "seconds"}
    env = document["environment"]
    for key in ("date", "platform", "cpu", "cpu_count", "python", "numpy", "coopnn", "vulkan", "torch",
                "onnxruntime", "device", "driver", "driver_shader_caches"):
        assert key in env, key
    assert env["device"] and env["driver"] and env["date"][:2] == "20"
    assert document["peaks"]["device"] == env["device"] and "label" in document["peaks"]
    settings = document["settings"]
    assert settings["batches"] == [8, 64] and settings["weights"] == "fp16" and settings["runs"] == 2
    for key in ("warmup", "min_runs", "seconds_per_batch", "max_run_seconds", "first_call_batch", "seed"):
        assert key in settings, key


def test_models_and_runners(document):
    assert [m["name"] for m in document["models"]] == ["mlp_3_64x2_3", "radiance_cache_layernorm"]
    for model in document["models"]:
        assert model["flops_per_sample"] > 0 and model["io_bytes_per_sample"] > 0 and model["parameters"] > 0
        assert "bandwidth_bound_samples_per_s" in model and "compute_bound_samples_per_s" in model
    for runner in document["runners"]:
        assert set(runner) == {"name", "kind", "description", "precision", "available", "reason"}


def _result(document, model, runner):
    return next(r for r in document["results"] if r["model"] == model and r["runner"] == runner)


def test_every_measured_batch_has_every_field(document):
    numpy = _result(document, "mlp_3_64x2_3", "numpy")
    assert numpy["status"] == "ok" and numpy["precision"] == "fp16 weights"
    assert set(numpy["first_call_ms"]) == {"cold", "warm"} and all(v > 0 for v in numpy["first_call_ms"].values())
    assert 0 < numpy["max_abs_error"] < 1e-3 and numpy["max_abs_reference"] > 0
    assert [b["batch"] for b in numpy["batches"]] == [8, 64]
    for record in numpy["batches"]:
        assert record["status"] == "measured" and record["runs"] >= 1 and record["warmup"] >= 1
        assert set(record["host_ms"]) == {"median", "min", "p90"}
        assert record["gpu_ms"] is None and record["time_source"] == "host"
        assert record["samples_per_s"] == pytest.approx(record["batch"] / record["host_ms"]["median"] * 1e3)
        assert record["host_samples_per_s"] == record["samples_per_s"]
        assert record["tflops"] == pytest.approx(record["samples_per_s"] * 8960 / 1e12)
        assert record["fraction_of_fp16_peak"] is None and record["fraction_of_bandwidth_bound"] is None
        # the bytes and FLOPs of the batch (float32 in and out, float16 weights) with no bound off known GPUs
        roof = record["roofline"]
        assert roof["flops"] == record["batch"] * 8960 and roof["bound_ms"] is None
        assert roof["bytes"] == record["batch"] * 6 * 4 + 2 * (3 * 64 + 64 + 64 * 64 + 64 + 64 * 3 + 3)
        assert roof["tb_per_s"] == pytest.approx(roof["bytes"] / record["host_ms"]["median"] / 1e9)


def test_failures_and_refusals_are_results(document):
    for model in ("mlp_3_64x2_3", "radiance_cache_layernorm"):
        broken = _result(document, model, "broken")
        assert broken["status"] == "failed" and broken["reason"] == "RuntimeError: device lost"
        picky = _result(document, model, "picky")
        assert (picky["status"], picky["reason"], picky["batches"]) == ("unsupported", "no fp16 here", [])


def test_unavailable_baselines_say_why(document):
    for runner in document["runners"]:
        if not runner["available"]:
            assert _result(document, "mlp_3_64x2_3", runner["name"])["reason"] == runner["reason"] != ""


def test_comparisons_against_the_first_baseline_measured(document):
    baselines = [r["name"] for r in document["runners"] if r["kind"] == "baseline" and r["available"]]
    if not baselines:
        assert document["comparisons"] == []
        return
    keys = {(c["model"], c["batch"], c["runner"]) for c in document["comparisons"]}
    assert ("mlp_3_64x2_3", 64, "numpy") in keys
    for c in document["comparisons"]:
        assert c["basis"] == "host" and c["speedup"] > 0
        if c["runner"] == c["reference"]:
            assert c["speedup"] == 1


def test_json_round_trip(document, tmp_path):
    save(document, tmp_path / "sub" / "results.json")
    assert load(tmp_path / "sub" / "results.json") == json.loads(json.dumps(document))


@pytest.mark.parametrize("text, batches", [("16384,262144", (16384, 262144)), ("2^14, 2^10,1024", (1024, 16384)),
                                           ("7", (7,))])
def test_parse_batches(text, batches):
    assert parse_batches(text) == batches


@pytest.mark.parametrize("text", ["", "0", "x", "2^", "-4"])
def test_parse_batches_rejects(text):
    with pytest.raises(ValueError):
        parse_batches(text)
