"""int8 weights on the cooperative-vector backend (GPU): every zoo model against the numpy backend's integer
arithmetic (`coopnn.layouts.formats.integer`) with the same calibration. Bit for bit for the benchmark MLPs, whose
products are exact integer sums between float32 steps both sides take alike; elsewhere the GPU's float32
transcendentals differ from numpy's in the last bits, which can move a later Linear's quantized input by one step:
within the float16 tolerance there, and for a model that branches on a threshold (piecewise_where) at most 0.5% of
the samples (and one) beyond it."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.graph.ir import Graph, Node, Op, Value
from coopnn.model import prepare
from tests.backends.coopvec.quantized_checks import assert_outputs_match
from tests.conftest import BENCHMARK_MLPS, ROOT, ZOO, random_feeds

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]


def _outputs(model, feeds) -> dict[str, np.ndarray]:
    got = model.run(feeds)
    return got if isinstance(got, dict) else {model.outputs[0].name: got}


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_model_in_int8_matches_the_integer_arithmetic(path):
    with coopnn.load(path, backend="numpy") as plain:
        calibration = random_feeds(plain, 512, seed=7)
    with (coopnn.load(path, backend="coopvec", weights="int8", calibration=calibration) as gpu,
          coopnn.load(path, backend="numpy", weights="int8", calibration=calibration) as reference):
        assert (gpu.backend, gpu.weights) == ("coopvec", "int8")
        for batch in (1, 65, 4096):
            feeds = random_feeds(gpu, batch, seed=batch)
            assert_outputs_match(_outputs(gpu, feeds), _outputs(reference, feeds), gpu.graph,
                                 f"{path.stem} at {batch}", exact=path.stem in BENCHMARK_MLPS)


def _one_linear() -> Graph:
    rng = np.random.default_rng(5)
    weight, bias = rng.normal(size=(16, 32)).astype(np.float32), rng.normal(size=16).astype(np.float32)
    x, y = Value("x", "f32", (None, 32)), Value("y", "f32", (None, 16))
    values = {"x": x, "y": y, "w": Value("w", "f32", weight.shape), "b": Value("b", "f32", bias.shape)}
    return Graph("one_linear", (x,), (y,), (Node(Op.LINEAR, "fc", ("x", "w", "b"), ("y",)),), values,
                 {"w": weight, "b": bias})


def test_nan_infinities_and_saturation_are_the_integer_arithmetics():
    """NaN makes every row of its sample NaN, infinities and values beyond the calibrated range saturate at +-127,
    tiny values quantize to 0: bit for bit. One Linear without activation, as the target's ReLU follows the
    driver's FMax on NaN (module docstring of `coopnn.backends.coopvec.target`)."""
    graph = _one_linear()
    rng = np.random.default_rng(3)
    calibration = rng.uniform(-1, 1, (256, 32)).astype(np.float32)
    x = rng.uniform(-1, 1, (300, 32)).astype(np.float32)
    x[::7, 3] = np.nan
    x[1::7, 5] = np.inf
    x[2::7, 9] = -np.inf
    x[3::7] *= 1e6
    x[4::7] *= 1e-30
    with (prepare(graph, backend="coopvec", weights="int8", calibration=calibration) as gpu,
          prepare(graph, backend="numpy", weights="int8", calibration=calibration) as reference):
        got, want = gpu.run(x), reference.run(x)
    assert np.isnan(got[::7]).all() and np.isfinite(np.delete(got, np.s_[::7], axis=0)).all()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("stem", BENCHMARK_MLPS)
def test_nan_reaches_every_output_of_an_mlp_through_its_relus(stem):
    """A hidden product takes the first product's NaN test (`nan_inherited`): the rows of the integer arithmetic,
    where every layer tests its own input and numpy's ReLU keeps NaN, bit for bit."""
    with coopnn.load(ROOT / "models" / f"{stem}.onnx", backend="numpy") as plain:
        calibration = random_feeds(plain, 512, seed=7)
    with (coopnn.load(ROOT / "models" / f"{stem}.onnx", backend="coopvec", weights="int8",
                      calibration=calibration) as gpu,
          coopnn.load(ROOT / "models" / f"{stem}.onnx", backend="numpy", weights="int8",
                      calibration=calibration) as reference):
        x = next(iter(random_feeds(gpu, 700, seed=11).values()))
        x[::7, 1] = np.nan
        x[1::7, 0] = np.inf
        got, want = gpu.run(x), reference.run(x)
    assert np.isnan(got[::7]).all() and np.isfinite(np.delete(got, np.s_[::7], axis=0)).all()
    np.testing.assert_array_equal(got, want)
