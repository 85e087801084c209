"""The numpy emulations: weights rounded as a format stores them, and the float16 emulation (the cooperative-vector
backend's oracle): where it rounds, and where it does not."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.graph.ir import Activation, Graph, Node, Op, Value
from coopnn.layouts.formats import format_names, weight_format
from coopnn.layouts.formats.emulation import emulate_weights, run_fp16_emulation
from coopnn.layouts.formats.fp16 import round_fp16


def _graph(weight, bias, activation=None, tail=None) -> Graph:
    x, h = Value("x", "f32", (None, 2)), Value("h", "f32", (None, 1))
    values = {"x": x, "h": h, "w": Value("w", "f32", weight.shape), "b": Value("b", "f32", bias.shape)}
    nodes = [Node(Op.LINEAR, "fc", ("x", "w", "b"), ("h",), {"activation": activation} if activation else {})]
    outputs = (h,)
    if tail:
        y = Value("y", "f32", (None, 1))
        values["y"] = y
        nodes.append(Node(tail, "tail", ("h",), ("y",)))
        outputs = (y,)
    return Graph("g", (x,), outputs, tuple(nodes), values, {"w": weight, "b": bias})


@pytest.mark.parametrize("name", format_names())
def test_emulated_weights_are_the_linear_constants_rounded_as_the_format_stores_them(name):
    """The weight as the format stores matrices, the bias as it stores vectors."""
    fmt = weight_format(name)
    w, b = np.array([[1 + 2 ** -12, 0.1]], np.float32), np.array([1 / 3], np.float32)
    graph = _graph(w, b)
    emulated = emulate_weights(graph, fmt)
    # a block format decodes whole blocks: the padding after the row's weights is dropped
    np.testing.assert_array_equal(emulated.constants["w"], fmt.decode(fmt.encode(w))[..., :w.shape[-1]])
    np.testing.assert_array_equal(emulated.constants["b"], fmt.vectors.decode(fmt.vectors.encode(b)))
    np.testing.assert_array_equal(graph.constants["w"], w)  # the graph given keeps its own values


def test_inputs_weights_bias_and_the_linear_result_are_rounded():
    w = np.array([[1 + 2 ** -12, 1.0]], np.float32)
    b = np.array([2 ** -14 * 1.3], np.float32)
    x = np.array([[1 + 2 ** -12, 0.1]], np.float32)
    got = run_fp16_emulation(_graph(w, b), {"x": x})["h"]
    xr, wr, br = round_fp16(x), round_fp16(w), round_fp16(b)
    want = round_fp16(xr @ wr.T + br)
    np.testing.assert_array_equal(got, want)
    assert want.dtype == np.float32 and not np.array_equal(want, x @ w.T + b)


def test_activations_and_later_operators_run_in_float32_until_the_output():
    w, b = np.array([[0.75, 0.5]], np.float32), np.array([0.125], np.float32)
    x = np.array([[0.3, -0.7]], np.float32)
    pre = round_fp16(round_fp16(x) @ w.T + b)
    fused = run_fp16_emulation(_graph(w, b, Activation(Op.SIGMOID)), {"x": x})["h"]
    np.testing.assert_array_equal(fused, round_fp16(1 / (1 + np.exp(-pre))))
    chained = run_fp16_emulation(_graph(w, b, tail=Op.EXP), {"x": x})["y"]
    np.testing.assert_array_equal(chained, round_fp16(np.exp(pre)))


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_a_scaled_format_rounds_the_product_then_the_scaled_product_then_the_biased_result(name):
    fmt = weight_format(name)
    w = np.array([[3.0, -0.37]], np.float32)
    b = np.array([1 / 3], np.float32)
    x = np.array([[0.3, -0.7], [1e-3, 2.0]], np.float32)
    got = run_fp16_emulation(_graph(w, b), {"x": x}, fmt)["h"]
    elements, scales = fmt.stored(w, "matrix")
    q, xr = fmt.decode(elements), round_fp16(x)  # the input stays float16
    p = round_fp16(xr[:, :1] * q[:, 0] + xr[:, 1:] * q[:, 1])  # exact products, summed in column order
    want = round_fp16(round_fp16(p * scales) + round_fp16(b))
    np.testing.assert_array_equal(got, want)
    assert scales[0] == np.float32(np.float16(3.0 / 448)) or scales[0] > 3.0 / 448
    assert not np.array_equal(want, round_fp16(xr @ (q * scales[:, None]).T + round_fp16(b)))
