"""Every zoo model on the numpy backend against onnxruntime (fp32 tolerance) at several batch sizes, in each 8-bit
float format against that format's float16 emulation, in int8 against its integer emulation (bit for bit), and in
each block format (q8_0, q4_0) as float32 arithmetic on its decoded weights."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.backends.numpy.inference import run_graph
from coopnn.graph.ir import Op
from coopnn.layouts.formats.emulation import emulate_weights, run_fp16_emulation
from coopnn.layouts.formats.integer import IntegerEmulation
from tests.conftest import BENCHMARK_MLPS, ZOO, ort_run, random_feeds


def _outputs(model, feeds) -> dict[str, np.ndarray]:
    got = model.run(feeds)
    return got if isinstance(got, dict) else {model.outputs[0].name: got}


def _assert_bit_for_bit(path, got, want, exact=None, error=None):
    """`got` equals `want` and is finite; for the benchmark MLPs, within `error` of the largest |output| of
    `exact` where given."""
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{path.stem}:{name}")
        assert np.isfinite(got[name]).all() or got[name].dtype == bool
        if exact is not None and path.stem in BENCHMARK_MLPS:
            assert np.abs(got[name] - exact[name]).max() <= error * np.abs(exact[name]).max()


def test_zoo_has_the_benchmark_models_and_at_least_ten():
    names = {p.stem for p in ZOO}
    assert set(BENCHMARK_MLPS) <= names
    assert len(names) >= 10


@pytest.mark.parametrize("batch", [1, 7, 1000, 65536])
@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_matches_onnxruntime(path, batch):
    with coopnn.load(path, backend="numpy") as model:
        feeds = random_feeds(model, batch, seed=batch)
        got = _outputs(model, feeds)
    want = ort_run(path, feeds)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=f"{path.stem}:{name}")


@pytest.mark.parametrize("weights", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_in_an_8_bit_format_is_its_float16_emulation(path, weights):
    """Bit for bit the format's emulation (`coopnn.layouts.formats.emulation`), and finite where float32 is."""
    with coopnn.load(path, backend="numpy", weights=weights) as model:
        feeds = random_feeds(model, 257, seed=5)
        got = _outputs(model, feeds)
        want = run_fp16_emulation(model.graph, feeds, model.weight_format)
    _assert_bit_for_bit(path, got, want)


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_in_int8_is_its_integer_emulation(path):
    """Bit for bit the integer emulation (`coopnn.layouts.formats.integer`) with each Linear's input scale measured
    on the calibration batch, finite, and for the benchmark MLPs within 4% of the largest |output| of float32
    onnxruntime (they measure 1.5 to 2.6%: bench/weight_accuracy.py)."""
    with coopnn.load(path, backend="numpy") as reference:
        calibration = random_feeds(reference, 2048, seed=1)
    with coopnn.load(path, backend="numpy", weights="int8", calibration=calibration) as model:
        assert len(model.weight_format.input_scales) == sum(n.op is Op.LINEAR for n in model.graph.nodes)
        feeds = random_feeds(model, 257, seed=5)
        got = _outputs(model, feeds)
        want = IntegerEmulation(model.graph, model.weight_format).run(feeds)
    _assert_bit_for_bit(path, got, want, ort_run(path, feeds), 0.04)


# the largest error of the benchmark MLPs against float32 onnxruntime, relative to the largest |output|: they measure
# 0.36 to 0.85% (q8_0) and 9.1 to 16.7% (q4_0) in bench/weight_accuracy.py
BLOCK_FORMAT_ERROR = {"q8_0": 0.02, "q4_0": 0.25}


@pytest.mark.parametrize("weights", ["q8_0", "q4_0"])
@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_in_a_block_format_is_float32_on_its_decoded_weights(path, weights):
    """Bit for bit the float32 interpreter on the graph with each Linear's weight decoded from its blocks and its
    bias as float32 (`emulate_weights`), finite, and for the benchmark MLPs within the format's error of float32
    onnxruntime."""
    with coopnn.load(path, backend="numpy", weights=weights) as model:
        feeds = random_feeds(model, 257, seed=5)
        got = _outputs(model, feeds)
        want = run_graph(emulate_weights(model.graph, model.weight_format), feeds)
    _assert_bit_for_bit(path, got, want, ort_run(path, feeds), BLOCK_FORMAT_ERROR[weights])
