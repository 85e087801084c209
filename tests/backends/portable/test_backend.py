"""The portable backend on a real Vulkan device (lavapipe in CI) with the validation layer on: every zoo model
against onnxruntime, in each 8-bit format (the floats, int8) against its emulation and in each block format (q8_0,
q4_0) against the numpy backend, batch splitting, auto selection, and a soak for leaks."""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest

import coopnn
from coopnn.graph.ir import Graph, Node, Op, Value
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.emulation import run_fp16_emulation
from coopnn.layouts.formats.integer import IntegerEmulation
from coopnn.model import prepare
from tests.conftest import BENCHMARK_MLPS, ROOT, ZOO, ort_run, random_feeds
from tests.devices import auto_backends

pytestmark = pytest.mark.vulkan
TIMINGS: dict[str, float] = {}


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


def _as_dict(model, out):
    return out if isinstance(out, dict) else {model.outputs[0].name: out}


def _check(model, path, batch, seed=0):
    feeds = random_feeds(model, batch, seed)
    got = _as_dict(model, model.run(feeds))
    want = ort_run(path, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=f"{path.stem}:{name}")
    assert model.device_messages == []


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_matches_onnxruntime_on_vulkan(path):
    with coopnn.load(path, backend="portable") as model:
        assert model.backend == "portable"
        for batch in (1, 31, 65, 1000):
            _check(model, path, batch, seed=batch)
        start = time.perf_counter()
        model.run(random_feeds(model, 4096))
        TIMINGS[path.stem] = (time.perf_counter() - start) / 4096


def test_report_time_per_sample(capsys):
    with capsys.disabled():
        for name, seconds in sorted(TIMINGS.items()):
            print(f"\n  portable {name}: {seconds * 1e6:.2f} us/sample (batch 4096, host time)", end="")
        print()


@pytest.mark.slow
def test_batch_of_2_pow_20_is_split_and_correct():
    path = ROOT / "models" / "mlp_3_64x2_3.onnx"
    with coopnn.load(path, backend="portable") as model:
        model._executable.max_chunk = 1 << 18  # force several chunks through the same buffers
        _check(model, path, 1 << 20)


def test_fp16_weights_match_an_fp16_rounded_reference():
    path = ROOT / "models" / "mlp_32_64x4_16.onnx"
    x = np.random.default_rng(3).uniform(-1, 1, (257, 32)).astype(np.float32)
    with coopnn.load(path, backend="portable", weights="fp16") as model:
        got = model.run(x)
        assert model.device_messages == []
    with coopnn.load(path, backend="numpy", weights="fp16") as reference:
        want = reference.run(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _assert_matches_emulation(got: dict, want: dict, stem: str) -> None:
    """Bit for bit for the benchmark MLPs (and booleans), else within the float16 tolerance."""
    assert set(got) == set(want)
    for name in want:
        if stem in BENCHMARK_MLPS or want[name].dtype == bool:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{stem}:{name}")
        else:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-3, atol=2.5e-3, err_msg=f"{stem}:{name}")


@pytest.mark.parametrize("weights", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_in_an_8_bit_format_is_its_float16_emulation_on_vulkan(path, weights):
    """The shader decodes the 8-bit elements and follows the emulation's float16 steps in its order: bit for bit where
    the model's other operators are exact in float32 (the benchmark MLPs, ReLU only), else within the float16
    tolerance, as the shader's float32 transcendentals differ from numpy's in the last bit before rounding."""
    with coopnn.load(path, backend="portable", weights=weights) as model:
        feeds = random_feeds(model, 257, seed=5)
        got = _as_dict(model, model.run(feeds))
        assert model.device_messages == []
        want = run_fp16_emulation(model.graph, feeds, model.weight_format)
    _assert_matches_emulation(got, want, path.stem)


@pytest.mark.parametrize("weights", ["fp8_e4m3", "fp8_e5m2"])
def test_8_bit_float_rounding_of_extreme_inputs_is_the_emulations(weights):
    """Inputs at float16's edges (subnormals, halfway points, beyond its range, NaN and infinities) and products near
    the 8-bit types' edges are rounded by the shader's integer float16 rounding exactly as numpy rounds them."""
    path = ROOT / "models" / "mlp_3_64x2_3.onnx"
    edges = np.array([0.0, -0.0, 1e-8, 2.98e-8, 2.99e-8, 6e-8, 3e-5, 6.1e-5, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11,
                      2049.0, 65503.0, 65519.0, 65520.0, 1e6, np.inf, -np.inf, np.nan, 0.0019, 0.00293, 0.0137,
                      0.0156, 0.0175, 432.0, 440.0, 448.0, 464.0, 500.0, 1.5e-5, 3.1e-5, 49152.0, 57344.0, 61440.0],
                     np.float32)
    rng = np.random.default_rng(4)
    x = np.stack([rng.permutation(np.concatenate([edges, -edges]))[:3] for _ in range(400)])
    with coopnn.load(path, backend="portable", weights=weights) as model:
        got = model.run(x)
        assert model.device_messages == []
        want = run_fp16_emulation(model.graph, {model.inputs[0].name: x}, model.weight_format)[model.outputs[0].name]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_in_int8_is_its_integer_emulation_on_vulkan(path):
    """The shader quantizes each Linear's input, sums 32-bit integer products and dequantizes as the emulation does
    (`coopnn.layouts.formats.integer`): bit for bit where the model's other operators are exact in float32 (the
    benchmark MLPs, ReLU only). Elsewhere the shader's float32 transcendentals differ from numpy's in the last bit,
    which can move a quantized input by one step: within the tolerance of the float32 comparisons."""
    with coopnn.load(path, backend="numpy") as reference:
        calibration = random_feeds(reference, 2048, seed=1)
    with coopnn.load(path, backend="portable", weights="int8", calibration=calibration) as model:
        feeds = random_feeds(model, 257, seed=5)
        got = _as_dict(model, model.run(feeds))
        assert model.device_messages == []
        want = IntegerEmulation(model.graph, model.weight_format).run(feeds)
    _assert_matches_emulation(got, want, path.stem)


def test_int8_quantization_of_extreme_inputs_is_the_emulations():
    """Inputs at the quantization's edges (exact ties to even, the clamp at 127, beyond the calibrated range, tiny,
    signed zeros, infinities and NaN) are quantized by the shader (multiply, RoundEven, clamp) exactly as numpy does;
    a NaN input makes its sample NaN."""
    path = ROOT / "models" / "mlp_3_64x2_3.onnx"
    rng = np.random.default_rng(6)
    calibration = rng.uniform(-0.99, 0.99, (100, 3)).astype(np.float32)
    calibration[7] = 127 / 128  # the first Linear's input scale is 2^-7: its multiplier 128 makes exact ties
    ties = (np.arange(-130, 130) + 0.5) / 128
    edges = np.concatenate([ties, [0.0, -0.0, 1e-45, -1e-38, 127 / 128, 1.0, 1e30, np.inf, -np.inf, np.nan]])
    x = np.stack([rng.permutation(edges)[:3] for _ in range(600)]).astype(np.float32)
    with coopnn.load(path, backend="portable", weights="int8", calibration=calibration) as model:
        assert model.weight_format.input_scale(model.graph.nodes[0].name) == 2.0 ** -7
        got = model.run(x)
        assert model.device_messages == []
    with coopnn.load(path, backend="numpy", weights=model.weight_format) as reference:
        want = reference.run(x)
    np.testing.assert_array_equal(got, want)
    nan = np.isnan(x).any(axis=1)
    assert nan.any() and np.isnan(got[nan]).all() and not np.isnan(got[~nan]).any()


@pytest.mark.parametrize("weights", ["q8_0", "q4_0"])
@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_in_a_block_format_is_the_numpy_backends_on_vulkan(path, weights):
    """The shader decodes the blocks as it reads them and computes in float32: the numpy backend's result in the same
    format, to float32 tolerance (numpy sums each product in its own order)."""
    with coopnn.load(path, backend="portable", weights=weights) as model:
        feeds = random_feeds(model, 257, seed=5)
        got = _as_dict(model, model.run(feeds))
        assert model.device_messages == []
    with coopnn.load(path, backend="numpy", weights=weights) as reference:
        want = _as_dict(reference, reference.run(feeds))
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=f"{path.stem}:{name}")


def _one_linear(weight: np.ndarray) -> Graph:
    rows, cols = weight.shape
    x, y = Value("x", "f32", (None, cols)), Value("y", "f32", (None, rows))
    values = {"x": x, "y": y, "w": Value("w", "f32", weight.shape)}
    return Graph("linear", (x,), (y,), (Node(Op.LINEAR, "fc", ("x", "w"), ("y",)),), values, {"w": weight})


@pytest.mark.parametrize("weights", ["q8_0", "q4_0"])
def test_the_shader_decodes_every_block_weight_as_numpy_does(weights):
    """One-hot inputs read single weights (W e_c is column c of W, exactly, in any order of summation), so the
    shader's weights are the emulation's bit for bit: every code, scales of both signs (Q4_0), float16-subnormal
    scales, a zero block, and a last block padded with zeros."""
    fmt = weight_format(weights)
    rng = np.random.default_rng(7)
    scales = np.array([1e-6, 2.0 ** -20, 1e-3, 1.0, 100.0, 3e4, 1.0, 1.0], np.float32)
    w = (rng.normal(size=(8, 290)) * scales[:, None]).astype(np.float32)  # 10 blocks a row, the last padded
    # every int8 code: blocks of 127 then 31 of -127..127, scale 1/100; every nibble: blocks of -8..7 twice, scale 1
    q8_codes = np.concatenate([np.arange(-127, 128), np.zeros(9 * 31 - 255)]).reshape(9, 31)
    w[6, :288] = (np.concatenate([np.full((9, 1), 127), q8_codes], axis=1) / 100).reshape(-1)
    w[7, :288] = np.tile(np.arange(-8, 8), 18)
    w[7, 32:64] = 0
    stored = fmt.encode(w)
    codes = np.concatenate([stored["qs"] & 0xF, stored["qs"] >> 4]) if weights == "q4_0" else stored["qs"].view(np.int8)
    assert len(np.unique(codes)) == (16 if weights == "q4_0" else 255)
    assert (stored["d"] < 0).any() == (weights == "q4_0") and (np.abs(stored["d"]) < 2.0 ** -14).sum() > 10
    with prepare(_one_linear(w), backend="portable", weights=weights) as model:
        got = model.run(np.eye(290, dtype=np.float32))
        assert model.device_messages == []
    np.testing.assert_array_equal(got, fmt.emulate(w).T)


def test_auto_takes_a_gpu_over_numpy_and_numpy_over_a_cpu_device():
    with coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx") as model:
        assert model.backend in auto_backends()
        if model.backend == "numpy":
            assert "is a CPU Vulkan device" in model.backend_reason


def test_nan_propagates():
    with coopnn.load(ROOT / "models" / "mlp_32_64x4_16.onnx", backend="portable") as model:
        x = np.zeros((4, 32), np.float32)
        x[2, 0] = np.nan
        y = model.run(x)
    assert np.isnan(y[2]).all() and not np.isnan(y[[0, 1, 3]]).any()


def test_gpu_time_is_measured():
    with coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx", backend="portable") as model:
        model.run(np.zeros((100, 3), np.float32))
        assert model.last_gpu_ms is None or model.last_gpu_ms > 0


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.slow
def test_soak_2000_runs_no_growth(monkeypatch):
    monkeypatch.delenv("COOPNN_VALIDATION", raising=False)  # the layer's own bookkeeping grows by design
    x = np.random.default_rng(0).uniform(-1, 1, (64, 3)).astype(np.float32)
    with coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx", backend="portable") as model:
        context = model._executable.context
        for _ in range(200):
            model.run(x)
        gc.collect()
        objects, rss = context.live_objects(), _rss_bytes()
        for _ in range(2000):
            model.run(x)
        gc.collect()
        assert context.live_objects() == objects
        assert _rss_bytes() - rss < 8 << 20, "host memory grew by more than 8 MiB over 2,000 runs"
    assert context.live_objects() == {}
