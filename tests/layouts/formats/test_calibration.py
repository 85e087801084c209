"""Calibration data: checked once (names, shapes, numbers, finite values; each error names the input), the largest
|value| reaching each Linear in float32, and when a format needs calibration or refuses it."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.errors import InputError
from coopnn.graph import ops
from coopnn.graph.ir import Op
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.calibration import calibrated, calibration_feeds, linear_input_ranges
from tests.conftest import ROOT

MLP = ROOT / "models" / "mlp_3_64x2_3.onnx"
TWO_INPUTS = ROOT / "models" / "nerf_skip_two_heads.onnx"
INT8 = weight_format("int8")


def _graph(path):
    with coopnn.load(path, backend="numpy") as model:
        return model.graph


def test_the_largest_value_reaching_each_linear_is_measured_in_float32():
    graph = _graph(MLP)
    x = np.random.default_rng(0).uniform(-2, 2, (70000, 3)).astype(np.float32)  # more than one chunk
    ranges = linear_input_ranges(graph, {"x": x})
    env = dict(graph.constants, x=x)
    want = {}
    for node in graph.nodes:
        if node.op is Op.LINEAR:
            want[node.name] = float(np.abs(env[node.inputs[0]]).max())
        env[node.outputs[0]] = ops.evaluate(node.op, [env[n] for n in node.inputs], node.attrs)
    assert ranges == want and len(want) == 3


def test_the_calibrated_format_carries_each_linears_scale():
    graph = _graph(MLP)
    x = np.random.default_rng(1).uniform(-1, 1, (100, 3)).astype(np.float32)
    fmt = calibrated(INT8, graph, x)
    ranges = linear_input_ranges(graph, {"x": x})
    assert dict(fmt.input_scales) == {k: INT8.input_quantization.scale(v) for k, v in ranges.items()}
    assert calibrated(fmt, graph, None) is fmt  # a calibrated format passed again keeps its scales
    with coopnn.load(MLP, backend="numpy", weights=fmt) as model:
        assert model.weight_format.input_scales == fmt.input_scales


def test_int8_without_calibration_says_what_to_pass():
    with pytest.raises(InputError, match=r"weights='int8' quantizes each Linear's input with a scale measured on "
                                         r"calibration data, so it needs calibration=: representative inputs.*\('x': "
                                         r"\[samples, 3\]\)"):
        coopnn.load(MLP, backend="numpy", weights="int8")
    with pytest.raises(InputError, match=r"by input name \('xyz': \[samples, 3\]; 'view_dir': \[samples, 3\]\)"):
        coopnn.compile(TWO_INPUTS, target="portable", weights="int8")


def test_a_format_that_does_not_quantize_inputs_takes_no_calibration():
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(InputError, match=r"weights='fp16' takes no calibration="):
        coopnn.compile(MLP, target="portable", weights="fp16", calibration=x)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_calibration_with_values_that_are_not_finite_names_the_input(bad):
    graph = _graph(TWO_INPUTS)
    names = [v.name for v in graph.inputs]
    feeds = {name: np.zeros((8, 3), np.float32) for name in names}
    feeds[names[1]][5, 2] = bad
    with pytest.raises(InputError, match=f"calibration for input {names[1]!r} has values that are not finite"):
        calibration_feeds(graph, feeds)
    with pytest.raises(InputError, match=f"calibration for input {names[1]!r} has values that are not finite"):
        coopnn.load(TWO_INPUTS, backend="numpy", weights="int8", calibration=feeds)


@pytest.mark.parametrize("calibration, message", [
    (np.zeros((10, 4), np.float32), r"calibration for input 'x' has shape \[10, 4\]; expected \[samples, 3\]"),
    (np.zeros((0, 3), np.float32), r"calibration for input 'x' has shape \[0, 3\]"),
    (np.zeros(3, np.float32), r"calibration for input 'x' has shape \[3\]"),
    ({"y": np.zeros((4, 3))}, r"calibration names \['y'\]; the model's inputs are \['x'\]"),
    (np.array([["a", "b", "c"]]), "calibration for input 'x' is not an array of numbers"),
])
def test_calibration_of_the_wrong_shape_or_kind_names_the_input(calibration, message):
    with pytest.raises(InputError, match=message):
        coopnn.load(MLP, backend="numpy", weights="int8", calibration=calibration)
