"""What the cooperative-matrix tile backends (coopmat2, coopmat) share, on any machine: backend='auto' never takes
them (even where they could run the model), asked for by name where the device lacks them they say what is missing,
they take float16 weights (coopmat2 the block formats q8_0 and q4_0 too), and they do not train."""

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
from coopnn.shaders.kernel.lower import lower
from tests.conftest import ROOT
from tests.devices import backend_skip_reason

TILE_BACKENDS = ("coopmat2", "coopmat")
MLP = ROOT / "models" / "mlp_3_64x2_3.onnx"


def _graph(stem: str):
    return optimize(import_model(ROOT / "models" / f"{stem}.onnx"))


def test_auto_passes_them_over_where_they_could_run_the_model(monkeypatch):
    graph = _graph("mlp_3_64x2_3")
    program = lower(graph)
    examined = {"coopvec": Examined("no cooperative vectors here")}
    for name in TILE_BACKENDS:
        monkeypatch.setattr(type(backends.get(name)), "unavailable_reason", lambda self: None)
        examined[name] = Examined(None, program)
    choice = backends.choose("auto", graph, FP16, None, examined)
    assert choice.backend.name not in TILE_BACKENDS
    for name in TILE_BACKENDS:
        assert (f"{name} skipped (backend='auto' does not choose {name}: coopvec was faster at every size measured "
                f"on the H100, and no other device has measured it (ask for backend='{name}'))") in choice.reason
        assert backends.get(name).priority < backends.get("coopvec").priority


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
