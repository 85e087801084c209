"""What the cooperative-matrix tile backends (coopmat2, coopmat) share, on any machine: backend='auto' takes them
where coopvec cannot run the model (coopmat2 first, coopmat where the device lacks coopmat2) but not on CPU devices,
asked for by name where the device lacks them they say what is missing, they take float16 weights (coopmat2 the
block formats q8_0 and q4_0 too), and they do not train."""

from __future__ import annotations

import pytest

import coopnn
from coopnn import backends
from coopnn.backends.base import Examined
from coopnn.errors import BackendUnavailableError
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.layouts.formats.q4_0 import FORMAT as Q4_0
from coopnn.runtime import executable
from coopnn.shaders.kernel.lower import lower
from tests.conftest import ROOT
from tests.backends.tile_devices import h100
from tests.devices import backend_skip_reason

TILE_BACKENDS = ("coopmat2", "coopmat")
MLP = ROOT / "models" / "mlp_3_64x2_3.onnx"


def _graph(stem: str):
    return optimize(import_model(ROOT / "models" / f"{stem}.onnx"))


def _auto(monkeypatch, stem: str, weights, device_type: str = "discrete"):
    """backend='auto' where coopvec cannot run and both tile backends can, on a made-up H100 of `device_type`."""
    graph = _graph(stem)
    program = lower(graph)
    monkeypatch.setattr(executable, "chosen_device", lambda device: h100(device_type=device_type))
    monkeypatch.setattr(type(backends.get("coopvec")), "unavailable_reason", lambda self: "no cooperative vectors here")
    examined = {}
    for name in TILE_BACKENDS:
        monkeypatch.setattr(type(backends.get(name)), "unavailable_reason", lambda self: None)
        examined[name] = Examined(None, program)
    return backends.choose("auto", graph, weights, None, examined)


def test_auto_ranks_them_below_coopvec_and_above_portable():
    priorities = [backends.get(name).priority for name in ("coopvec", *TILE_BACKENDS, "portable")]
    assert priorities == sorted(priorities, reverse=True)


@pytest.mark.parametrize("stem", ["mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16"])
def test_auto_takes_coopmat2_for_float16_layers_of_any_width(monkeypatch, stem):
    choice = _auto(monkeypatch, stem, FP16)
    assert choice.backend.name == "coopmat2"
    assert choice.reason == "auto: coopvec skipped (no cooperative vectors here)"


def test_auto_takes_coopmat_where_the_device_lacks_coopmat2(monkeypatch):
    graph = _graph("mlp_64_128x4_16")
    info = h100(matrix2=False)
    monkeypatch.setattr(executable, "chosen_device", lambda device: info)
    monkeypatch.setattr(type(backends.get("coopvec")), "unavailable_reason", lambda self: "no cooperative vectors here")
    for name in TILE_BACKENDS:
        monkeypatch.setattr(type(backends.get(name)), "unavailable_reason", lambda self: None)
    examined = {"coopmat2": Examined(backends.get("coopmat2").device_needs(info)),
                "coopmat": Examined(None, lower(graph))}
    choice = backends.choose("auto", graph, FP16, None, examined)
    assert choice.backend.name == "coopmat"
    assert "coopmat2 skipped (H100 lacks VK_NV_cooperative_matrix2)" in choice.reason


@pytest.mark.parametrize("stem", ["mlp_3_64x2_3", "mlp_64_128x4_16"])
def test_auto_takes_coopmat2_for_block_formats_at_any_width(monkeypatch, stem):
    assert _auto(monkeypatch, stem, Q4_0).backend.name == "coopmat2"


def test_auto_passes_them_over_on_a_cpu_device(monkeypatch):
    choice = _auto(monkeypatch, "mlp_3_64x2_3", FP16, device_type="cpu")
    assert choice.backend.name not in TILE_BACKENDS
    for name in TILE_BACKENDS:
        assert (f"{name} skipped (H100 is a CPU Vulkan device, where auto runs numpy and nothing has measured {name} "
                f"(ask for backend='{name}'))") in choice.reason


@pytest.mark.parametrize("name", TILE_BACKENDS)
def test_asked_for_where_the_device_lacks_them_they_say_what_is_missing(name):
    reason = backends.get(name).unavailable_reason()
    if reason is None:
        pytest.skip(f"this machine's device takes {name}")
    with pytest.raises(BackendUnavailableError, match=f"backend '{name}' is unavailable: "):
        coopnn.load(MLP, backend=name)
    assert backend_skip_reason(name).endswith(reason)


@pytest.mark.parametrize("name, formats", [("coopmat2", "fp16 or q8_0 or q4_0"), ("coopmat", "fp16")])
def test_they_take_float16_weights_and_coopmat2_the_block_formats(name, formats):
    backend = backends.get(name)
    assert " or ".join(f.name for f in backend.formats) == formats
    assert backends.examine(backend, _graph("mlp_3_64x2_3"), FP32, None).reason == (
        f"the {name} backend stores weights as {formats}, not 'fp32' (pass weights='fp16')")


@pytest.mark.parametrize("name", TILE_BACKENDS)
def test_they_do_not_train(name):
    assert name not in backends.training_backends()
    with pytest.raises(BackendUnavailableError, match=f"backend '{name}' cannot train"):
        backends.training_backend(name)
    with pytest.raises(BackendUnavailableError, match=f"the {name} backend runs inference only"):
        backends.get(name).prepare_training(_graph("mlp_3_64x2_3"), None, None, device=None)
