"""`weights="auto"`: the float16 error measure, the decision on models that must stay float32 and that may go float16
(with the float16 path emulated in numpy where no cooperative-vector device exists), the tile backends deciding
where coopvec cannot run, and calibration checks."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn import backends
from coopnn.backends.base import Examined
from coopnn.errors import InputError
from coopnn.backends import auto_weights as precision
from coopnn.backends.coopmat2.backend import Coopmat2Backend
from coopnn.backends.coopvec.backend import CoopvecBackend
from tests.conftest import ROOT


def _graph(name):
    return coopnn.load(ROOT / "models" / f"{name}.onnx", backend="numpy", weights="fp32").graph


@pytest.fixture
def float16_backend_here(monkeypatch):
    """Pretend a cooperative-vector device runs every model: the decision then rests on the numpy emulation alone."""
    monkeypatch.setattr(CoopvecBackend, "unavailable_reason", lambda self: None)
    monkeypatch.setattr(CoopvecBackend, "examine", lambda self, graph, weights, device: Examined(None))


def test_a_relu_mlp_may_go_float16(float16_backend_here):
    choice = precision.choose_weights(_graph("mlp_32_64x4_16"), "auto", None)
    assert choice.weights.name == "fp16" and choice.error < precision.AUTO_TOLERANCE
    assert "float16, whose outputs stay within" in choice.reason and "default calibration" in choice.reason


@pytest.mark.parametrize("name", ["siren_sdf", "neural_material_freq", "piecewise_where"])
def test_sensitive_models_stay_float32(float16_backend_here, name):
    choice = precision.choose_weights(_graph(name), "auto", None)
    assert choice.weights.name == "fp32" and choice.error > precision.AUTO_TOLERANCE
    assert "float16 puts the outputs" in choice.reason


def test_the_users_calibration_batch_is_used(float16_backend_here):
    graph = _graph("mlp_32_64x4_16")
    x = np.random.default_rng(1).uniform(0, 1, (100, 32))
    choice = precision.choose_weights(graph, "auto", None, calibration=x)
    assert "your calibration batch (100 samples" in choice.reason
    with pytest.raises(InputError, match=r"calibration for input .* has shape \[100, 31\]"):
        precision.choose_weights(graph, "auto", None, calibration=x[:, :31])
    with pytest.raises(InputError, match="calibration names"):
        precision.choose_weights(graph, "auto", None, calibration={"nope": x})


def test_named_backends_and_no_float16_backend_decide_without_measuring(monkeypatch):
    monkeypatch.setattr(precision, "float16_error", lambda *a: pytest.fail("measured without a float16 backend"))
    graph = _graph("mlp_32_64x4_16")
    assert precision.choose_weights(graph, "coopvec", None).weights.name == "fp16"
    assert precision.choose_weights(graph, "portable", None).weights.name == "fp32"
    for name in precision.FLOAT16_BACKENDS:
        monkeypatch.setattr(type(backends.get(name)), "unavailable_reason", lambda self: "no GPU here")
    assert precision.choose_weights(graph, "auto", None).weights.name == "fp32"


def test_error_measure_counts_non_finite_mismatches_as_the_whole_range(monkeypatch):
    graph = _graph("mlp_3_64x2_3")
    feeds = precision.default_calibration(graph, samples=16)
    name = graph.outputs[0].name
    reference = precision.run_graph(graph, feeds)
    broken = {name: reference[name].copy()}
    broken[name][3, 0] = np.inf
    monkeypatch.setattr(precision, "run_fp16_emulation", lambda g, f: broken)
    assert precision.float16_error(graph, feeds) == 1.0


def test_calibration_needs_auto_or_a_format_that_quantizes_inputs():
    with pytest.raises(InputError, match=r"weights='fp32' takes no calibration=: it is for weights='auto' and for "
                                         r"formats that quantize inputs \(int8\)"):
        coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx", backend="numpy", weights="fp32",
                    calibration=np.zeros((1, 3)))


def test_a_tile_backend_decides_where_coopvec_cannot_run(monkeypatch):
    """No cooperative vectors, a GPU with cooperative matrices: float16 on the tile backend auto would take, and what
    it examined is handed on."""
    monkeypatch.setattr(CoopvecBackend, "unavailable_reason", lambda self: "no cooperative vectors here")
    monkeypatch.setattr(Coopmat2Backend, "unavailable_reason", lambda self: None)
    monkeypatch.setattr(Coopmat2Backend, "examine", lambda self, graph, weights, device: Examined(None, "lowered"))
    monkeypatch.setattr(Coopmat2Backend, "auto_skip_reason", lambda self, device, lowered, weights: None)
    choice = precision.choose_weights(_graph("mlp_32_64x4_16"), "auto", None)
    assert choice.weights.name == "fp16" and dict(choice.examined) == {"coopmat2": Examined(None, "lowered")}
