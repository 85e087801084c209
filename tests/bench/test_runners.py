"""What the harness can benchmark: every registered backend, the baselines, and choosing among them."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.bench.models import BenchModel
from coopnn.bench.runners import BASELINES, REFERENCE_ORDER, all_specs, select_runners
from coopnn.errors import BackendUnavailableError
from coopnn import backends
from tests.conftest import ROOT

NERF = ROOT / "models" / "nerf_skip_two_heads.onnx"


def test_every_registered_backend_is_a_runner():
    coopnn_names = [s.name for s in all_specs() if s.kind == "coopnn"]
    assert coopnn_names == [b.name for b in backends.all_backends()]
    assert [s.name for s in all_specs() if s.kind == "baseline"] == list(REFERENCE_ORDER)


def test_all_keeps_unavailable_runners_so_results_can_say_why():
    chosen = select_runners("all", "all")
    assert [s.name for s in chosen] == [s.name for s in all_specs()]
    for spec in chosen:
        record = spec.record()
        assert record["available"] == (record["reason"] == "")


def test_names_and_none():
    chosen = select_runners("numpy", "none")
    assert [s.name for s in chosen] == ["numpy"]
    assert select_runners("none", "none") == []


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(BackendUnavailableError, match="unknown backend 'cuda'.*numpy"):
        select_runners("cuda")
    with pytest.raises(BackendUnavailableError, match="unknown baseline 'tf'.*torch-cuda-fp16"):
        select_runners("none", "tf")


def test_a_named_unavailable_runner_is_an_error():
    unavailable = [s for s in BASELINES if s.unavailable_reason()]
    if not unavailable:
        pytest.skip("every baseline is available here")
    with pytest.raises(BackendUnavailableError, match="is unavailable"):
        select_runners("none", unavailable[0].name)


def test_coopnn_runner_returns_outputs_by_name():
    model = BenchModel.load(NERF)
    runner = select_runners("numpy")[0].prepare(model, "fp32")
    outputs, gpu_ms = runner.run(model.feeds(5))
    runner.close()
    assert gpu_ms is None and set(outputs) == {"sigma", "rgb"} and outputs["rgb"].shape == (5, 3)


@pytest.mark.parametrize("name", ["onnxruntime-cpu", "torch-cpu-fp32"])
def test_cpu_baselines_run_the_same_model(name):
    spec = next(s for s in BASELINES if s.name == name)
    if spec.unavailable_reason():
        pytest.skip(spec.unavailable_reason())
    model = BenchModel.load(NERF)
    feeds = model.feeds(7)
    reference = select_runners("numpy")[0].prepare(model, "fp32").run(feeds)[0]
    runner = spec.prepare(model, "fp32")
    outputs, gpu_ms = runner.run(feeds)
    runner.close()
    assert gpu_ms is None
    for key in reference:
        np.testing.assert_allclose(outputs[key], reference[key], rtol=1e-4, atol=1e-5)
