"""The integer arithmetic of int8 (`coopnn.layouts.formats.integer`) against a straightforward computation written
from its definition with Python integers, sample by sample: quantized inputs (half to even, saturating, NaN), 32-bit
sums, the integer bias, the float32 dequantization, NaN rows; and what the format refuses to store."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import CompileError
from coopnn.graph import ops
from coopnn.graph.ir import Activation, Graph, Node, Op, Value
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.integer import IntegerEmulation, quantize_layer

INT8 = weight_format("int8")


def _graph(weight, bias, activation=None) -> Graph:
    rows, cols = weight.shape
    x, h = Value("x", "f32", (None, cols)), Value("h", "f32", (None, rows))
    values = {"x": x, "h": h, "w": Value("w", "f32", weight.shape)}
    constants = {"w": weight}
    inputs = ("x", "w")
    if bias is not None:
        values["b"] = Value("b", "f32", bias.shape)
        constants["b"] = bias
        inputs += ("b",)
    attrs = {"activation": activation} if activation else {}
    return Graph("g", (x,), (h,), (Node(Op.LINEAR, "fc", inputs, ("h",), attrs),), values, constants)


def _by_hand(x, weight, bias, input_scale):
    """y for each sample of x, from the definition, with Python integers where it sums integers."""
    rows, cols = weight.shape
    row_scales = []
    for r in range(rows):
        top = max(abs(float(w)) for w in weight[r])
        scale = np.float32(top / 127)
        if float(scale) < top / 127:
            scale = np.nextafter(scale, np.float32(np.inf))
        row_scales.append(np.float32(1) if top == 0 else scale)
    q_weight = [[int(np.rint(weight[r, c] / row_scales[r])) for c in range(cols)] for r in range(rows)]
    s_x = np.float32(input_scale)
    multiplier = np.float32(1) / s_x
    dequantization = [np.float32(float(row_scales[r]) * float(s_x)) for r in range(rows)]
    limit = 2 ** 31 - 1 - 127 * 127 * cols
    q_bias = [0] * rows if bias is None else [max(-limit, min(limit, round(float(bias[r]) / float(dequantization[r]))))
                                              for r in range(rows)]
    out = np.empty((len(x), rows), np.float32)
    for n, sample in enumerate(x):
        q = []
        for value in sample:
            v = np.float32(value) * multiplier
            q.append(0 if np.isnan(v) else int(max(-127.0, min(127.0, float(np.rint(v))))))
        for r in range(rows):
            total = sum(q_weight[r][c] * q[c] for c in range(cols)) + q_bias[r]
            assert -2 ** 31 <= total < 2 ** 31
            out[n, r] = np.nan if np.isnan(sample).any() else np.float32(total) * dequantization[r]
    return out


def _inputs(cols, rng):
    x = rng.uniform(-1.5, 1.5, (300, cols)).astype(np.float32)
    edges = np.array([0.0, -0.0, 1e-30, 1 / 256, 3 / 256, -5 / 256, 1.0, -1.0, 1.2, 1e6, np.inf, -np.inf, np.nan],
                     np.float32)
    x[:len(edges), 0] = edges
    x[10, 1:] = x[9, 1:]  # 1e6 and infinity in one column, the same elsewhere
    return x


@pytest.mark.parametrize("with_bias", [True, False])
def test_the_emulation_is_the_arithmetic_computed_by_hand(with_bias):
    rng = np.random.default_rng(3)
    weight = rng.normal(size=(6, 5)).astype(np.float32)
    weight[2] = 0
    weight[4] *= 1e-4
    bias = rng.normal(size=6).astype(np.float32) if with_bias else None
    x = _inputs(5, rng)
    fmt = INT8.calibrated({"fc": 2.0 ** -7})  # exact ties at odd multiples of 2^-8; beyond 127 / 128 saturates
    got = IntegerEmulation(_graph(weight, bias), fmt).run({"x": x})["h"]
    want = _by_hand(x, weight, bias, 2.0 ** -7)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[12]).all() and np.isfinite(got[np.arange(len(x)) != 12]).all()
    assert np.array_equal(got[9], got[10])  # 1e6 and infinity saturate alike


def test_the_activation_follows_in_float32():
    rng = np.random.default_rng(4)
    weight, bias = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=3).astype(np.float32)
    x = rng.uniform(-1, 1, (50, 4)).astype(np.float32)
    fmt = INT8.calibrated({"fc": 0.01})
    plain = IntegerEmulation(_graph(weight, bias), fmt).run({"x": x})["h"]
    sigmoid = IntegerEmulation(_graph(weight, bias, Activation(Op.SIGMOID)), fmt).run({"x": x})["h"]
    np.testing.assert_array_equal(sigmoid, ops.evaluate(Op.SIGMOID, [plain], {}))


def test_the_bias_saturates_so_that_the_sum_stays_a_32_bit_integer():
    weight = np.array([[1e-6, 1e-6]], np.float32)
    stored = quantize_layer(INT8, weight, np.array([1e9], np.float32), 1e-6, "Linear 'fc'")
    assert stored.bias.dtype == np.int32 and stored.bias[0] == 2 ** 31 - 1 - 127 * 127 * 2
    x = np.full((1, 2), 1.0, np.float32)
    got = IntegerEmulation(_graph(weight, np.array([1e9], np.float32)), INT8.calibrated({"fc": 1e-6})).run({"x": x})
    assert got["h"][0, 0] == np.float32(2 ** 31 - 1) * stored.dequantization[0]


def test_what_int8_cannot_store_is_a_compile_error_naming_the_linear():
    with pytest.raises(CompileError, match="Linear 'fc' has 133145 inputs; weights='int8' sums them exactly in 32-bit "
                                           "integers only up to 133144"):
        quantize_layer(INT8, np.ones((1, 133145), np.float32), None, 1.0, "Linear 'fc'")
    with pytest.raises(CompileError, match="Linear 'fc' has a bias that is not finite"):
        quantize_layer(INT8, np.ones((1, 2), np.float32), np.array([np.nan], np.float32), 1.0, "Linear 'fc'")
    with pytest.raises(CompileError, match="Linear 'fc' has weights that are not finite"):
        quantize_layer(INT8, np.array([[np.inf, 1]], np.float32), None, 1.0, "Linear 'fc'")


def test_stored_values_are_the_definitions():
    rng = np.random.default_rng(5)
    weight, bias = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=4).astype(np.float32)
    stored = quantize_layer(INT8, weight, bias, 0.02, "Linear 'fc'")
    elements, row_scales = INT8.stored(weight, "matrix")
    np.testing.assert_array_equal(stored.elements, elements)
    assert stored.input_scale == np.float32(0.02) and stored.multiplier == np.float32(1) / np.float32(0.02)
    np.testing.assert_array_equal(stored.dequantization, (row_scales * np.float32(0.02)).astype(np.float32))
    np.testing.assert_array_equal(stored.bias, np.rint(bias.astype(np.float64) / stored.dequantization))
