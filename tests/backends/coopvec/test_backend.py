"""The coopvec backend: when it is offered (anywhere: the checks run on made-up device descriptions and on whatever
Vulkan device is present), and on a device with cooperative vectors, auto selection, the weight cache and the plain
row- and column-major layouts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import coopnn
from coopnn import backends
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.layouts.formats.emulation import run_fp16_emulation
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.backends.coopvec.layouts import pack_plan
from coopnn.backends.coopvec import backend as coopvec_backend
from coopnn.backends.coopvec.backend import CoopvecBackend, program_unsupported_reason
from coopnn.shaders.kernel.lower import lower
from coopnn.backends.coopvec.products import weight_plan
from tests.conftest import ROOT
from tests.devices import coopvec_skip_reason

MLP = ROOT / "models" / "mlp_32_64x4_16.onnx"
ODD_MLP = ROOT / "models" / "mlp_3_64x2_3.onnx"


def _graph(path):
    return optimize(import_model(path))


def _device(combinations, max_components=512):
    from coopnn.runtime.vk.device_info import CooperativeVectorCombination, CooperativeVectorSupport
    from coopnn.runtime.vk.nv_ffi import ComponentType

    rows = tuple(CooperativeVectorCombination(*(ComponentType[t] for t in c), transpose=False) for c in combinations)
    support = CooperativeVectorSupport(True, False, 0x20, False, False, max_components, rows)
    return SimpleNamespace(name="made-up gpu", cooperative_vector=support)


def test_the_model_needs_its_type_combination_listed_and_its_vectors_held():
    pytest.importorskip("vulkan")
    program = lower(_graph(ROOT / "models" / "mlp_64_128x4_16.onnx"))
    f16 = ("FLOAT16",) * 5
    assert program_unsupported_reason(_device([f16]), program) is None
    why = program_unsupported_reason(_device([("SINT8", "SINT8", "SINT8", "SINT32", "SINT32")]), program)
    assert "made-up gpu does not list" in why and "FLOAT16/FLOAT16/FLOAT16/FLOAT16/FLOAT16" in why
    why = program_unsupported_reason(_device([f16], max_components=64), program)
    assert "128 components" in why and "at most 64" in why


def test_only_float16_weights_are_offered():
    why = backends.examine(CoopvecBackend(), _graph(MLP), FP32, None).reason
    assert "weights='fp16'" in why


def test_a_device_without_the_extension_is_reported_not_used():
    from coopnn.runtime.vk.probe import vulkan_unavailable_reason

    if vulkan_unavailable_reason():
        pytest.skip(f"Vulkan unavailable: {vulkan_unavailable_reason()}")
    if coopvec_skip_reason() is None:
        pytest.skip("this device has cooperative vectors")
    assert "lacks VK_NV_cooperative_vector" in CoopvecBackend().unavailable_reason()
    with coopnn.load(MLP, weights="fp16") as model:
        assert model.backend != "coopvec" and "coopvec skipped" in model.backend_reason
    with pytest.raises(coopnn.BackendUnavailableError, match="backend 'coopvec' is unavailable"):
        coopnn.load(MLP, backend="coopvec", weights="fp16")


@pytest.mark.gpu
def test_auto_selects_coopvec_in_float16_where_it_is_accurate(coopvec_device):
    with coopnn.load(MLP) as model:
        assert (model.backend, model.weights) == ("coopvec", "fp16")
        assert "weights='auto': float16" in model.backend_reason
    with coopnn.load(MLP, weights="fp16") as model:
        assert model.backend == "coopvec"
    with coopnn.load(MLP, backend="coopvec") as model:
        assert model.weights == "fp16"
    with coopnn.load(ROOT / "models" / "siren_sdf.onnx") as model:
        assert (model.backend, model.weights) == ("portable", "fp32")
        assert "weights='auto': float32" in model.backend_reason
    with coopnn.load(MLP, weights="fp32") as model:
        assert model.backend == "portable" and "coopvec skipped" in model.backend_reason


@pytest.mark.gpu
def test_converted_weights_are_cached_per_device_and_driver(coopvec_device, monkeypatch):
    plan = weight_plan(lower(_graph(MLP)), FP16)
    first = coopvec_backend.optimal_weights(plan, None)
    assert all(e.layout in ("inferencing_optimal", "vector") for e in first.entries.values())

    def refuse(*args):
        raise AssertionError("converted again despite the cache")

    monkeypatch.setattr(coopvec_backend, "convert_weights", refuse)
    assert coopvec_backend.optimal_weights(plan, None) == first


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["row_major", "column_major", "inferencing_optimal"])
@pytest.mark.parametrize("path", [MLP, ODD_MLP], ids=lambda p: p.stem)
def test_every_layout_gives_the_fp16_reference(coopvec_device, path, layout):
    from coopnn.runtime.executable import KernelExecutable
    from coopnn.backends import target

    graph = _graph(path)
    program = lower(graph)
    plan = weight_plan(program, FP16)
    packed = (coopvec_backend.optimal_weights(plan, None) if layout == "inferencing_optimal"
              else pack_plan(plan, layout))
    executable = KernelExecutable(target("coopvec").compile(program, FP16, 64, packed=packed), graph, None)
    try:
        x = np.random.default_rng(5).uniform(-1, 1, (4099, graph.inputs[0].feature_size)).astype(np.float32)
        got = executable.run({graph.inputs[0].name: x})
    finally:
        executable.close()
    want = run_fp16_emulation(graph, {graph.inputs[0].name: x})
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-3, atol=2.5e-3)


@pytest.mark.gpu
def test_device_arrays_in_and_out_on_coopvec(coopvec_device):
    with coopnn.load(MLP, weights="fp16") as model:
        x = np.random.default_rng(9).uniform(-1, 1, (70000, 32)).astype(np.float32)
        y = model.run(coopnn.to_device(x))
        np.testing.assert_array_equal(y.numpy(), model.run(x))
        assert model.last_gpu_ms > 0


@pytest.mark.gpu
@pytest.mark.parametrize("path", [MLP, ODD_MLP, ROOT / "models" / "mlp_64_128x4_16.onnx"], ids=lambda p: p.stem)
def test_float16_device_arrays_read_and_write_halves_as_the_oracle_says(coopvec_device, path):
    """The float16-I/O kernel against the numpy oracle of float16-rounded weights and inputs, and equal to the float32
    path on the same float16 inputs (that path rounds inputs to float16 and outputs to float16 too); widths 3 and 32
    in, 3 and 16 out (row by row and whole-vector loads and stores); a batch not a multiple of the workgroup."""
    with coopnn.load(path, weights="fp16") as model:
        features = model.inputs[0].shape[1]
        x = np.random.default_rng(11).uniform(-1, 1, (70001, features)).astype(np.float16)
        y = model.run(coopnn.to_device(x, dtype="float16"))
        assert y.dtype == np.float16 and y.shape == (70001, model.outputs[0].shape[1])
        got = y.numpy().astype(np.float32)
        np.testing.assert_array_equal(got, model.run(x.astype(np.float32)))
        graph = _graph(path)
        want = run_fp16_emulation(graph, {graph.inputs[0].name: x.astype(np.float32)})[graph.outputs[0].name]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=2.5e-3)
        assert model.last_gpu_ms > 0
