"""Each weight format the numpy backend accepts is the one it interprets the model with: every Linear's weight is the
format's numpy emulation of the model's values and its bias the emulation in the format's vector format (the same
object the registry resolved), or for a format with row scales its results are the float16 emulation of that format,
or for one that quantizes inputs its integer emulation with the input scales measured on the calibration data; and
the model reports the format's name."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.backends.numpy.backend import NumpyBackend
from coopnn.graph.ir import Op
from coopnn.layouts.formats.calibration import calibration_feeds, linear_input_ranges
from coopnn.layouts.formats.emulation import run_fp16_emulation
from coopnn.layouts.formats.integer import IntegerEmulation
from tests.conftest import ROOT, random_feeds

MODEL = ROOT / "models" / "mlp_3_64x2_3.onnx"


UNSCALED = [f for f in NumpyBackend.formats if f.row_scales is None]
SCALED = [f for f in NumpyBackend.formats if f.row_scales is not None and f.input_quantization is None]
QUANTIZING = [f for f in NumpyBackend.formats if f.input_quantization is not None]


@pytest.mark.parametrize("fmt", UNSCALED, ids=lambda f: f.name)
def test_the_interpreted_weights_are_the_formats_emulation(fmt):
    with coopnn.load(MODEL, backend="numpy", weights=fmt.name) as model:
        assert (model.weights, model.weight_format) == (fmt.name, fmt)
        given, interpreted = model.graph, model._executable.graph
        linear = [node for node in given.nodes if node.op is Op.LINEAR]
        assert linear
        for node in linear:
            weight, *bias = node.inputs[1:]
            for name, stored_as in [(weight, fmt)] + [(name, fmt.vectors) for name in bias]:
                want = stored_as.emulate(given.constants[name])
                np.testing.assert_array_equal(interpreted.constants[name], want, err_msg=f"{fmt.name}: {name}")
                assert interpreted.constants[name].dtype == np.float32


def test_the_formats_differ_where_the_weights_do_not_fit_the_narrower_one():
    """The check above means something: the formats round this model's weights apart."""
    with coopnn.load(MODEL, backend="numpy") as model:
        graph = model.graph
    weight = graph.constants[next(node for node in graph.nodes if node.op is Op.LINEAR).inputs[1]]
    assert len({fmt.emulate(weight).tobytes() for fmt in NumpyBackend.formats}) == len(NumpyBackend.formats)


@pytest.mark.parametrize("fmt", SCALED, ids=lambda f: f.name)
def test_a_scaled_format_runs_its_float16_emulation(fmt):
    with coopnn.load(MODEL, backend="numpy", weights=fmt.name) as model:
        assert (model.weights, model.weight_format) == (fmt.name, fmt)
        feeds = random_feeds(model, 300, seed=3)
        got = model.run(feeds)
    name = model.outputs[0].name
    want = run_fp16_emulation(model.graph, feeds, fmt)[name]
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32 and not np.array_equal(want, run_fp16_emulation(model.graph, feeds)[name])


@pytest.mark.parametrize("fmt", QUANTIZING, ids=lambda f: f.name)
def test_a_format_that_quantizes_inputs_runs_its_integer_emulation_with_the_calibrated_scales(fmt):
    x = np.random.default_rng(2).uniform(-1, 1, (500, 3)).astype(np.float32)
    with coopnn.load(MODEL, backend="numpy", weights=fmt.name, calibration=x) as model:
        assert (model.weights, model.weight_format) == (fmt.name, fmt)
        feeds = random_feeds(model, 300, seed=3)
        got = model.run(feeds)
    ranges = linear_input_ranges(model.graph, calibration_feeds(model.graph, x))
    assert dict(model.weight_format.input_scales) == {name: fmt.input_quantization.scale(value)
                                                      for name, value in ranges.items()}
    assert len(ranges) == 3 and all(value > 0 for value in ranges.values())
    name = model.outputs[0].name
    want = IntegerEmulation(model.graph, model.weight_format).run(feeds)[name]
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32 and not np.array_equal(got, run_fp16_emulation(model.graph, feeds)[name])
