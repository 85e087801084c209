"""What the quantized-format GPU tests share: a graph and inputs that show how a device converts a Linear's float16
input to an 8-bit float type (one value at a time and exactly, whatever order its hardware sums products in), and the
comparison of a model's outputs with its format's emulation."""

from __future__ import annotations

import numpy as np

from coopnn.graph.ir import Graph, Node, Op, Value

RTOL, ATOL = 1e-3, 2.5e-3
BRANCHED_SAMPLES = 0.005

WIDTH = 16


def one_value_probe() -> Graph:
    """y = W x with W = 2^-6 I + (ones on the cyclic superdiagonal): each row's largest weight (1) sets its scale, so
    the diagonal is stored as 7 (in E4M3 and E5M2 at a largest stored value of 448), and a sample with one nonzero
    input x_c gives y_c = the scaled 7 * x8_c, an exact product below float16's largest value for every input."""
    weight = np.eye(WIDTH, dtype=np.float32) * 2.0 ** -6 + np.roll(np.eye(WIDTH, dtype=np.float32), 1, axis=1)
    x, y = Value("x", "f32", (None, WIDTH)), Value("y", "f32", (None, WIDTH))
    values = {"x": x, "y": y, "w": Value("w", "f32", weight.shape)}
    return Graph("one_value_probe", (x,), (y,), (Node(Op.LINEAR, "fc", ("x", "w"), ("y",)),), values, {"w": weight})


def every_float16(finite: bool = True) -> np.ndarray:
    """One sample per float16 value (the finite ones, or all 65536 bit patterns), in column i % 16 of sample i."""
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    if finite:
        values = values[np.isfinite(values)]
    x = np.zeros((len(values), WIDTH), np.float32)
    x[np.arange(len(values)), np.arange(len(values)) % WIDTH] = values
    return x


def assert_outputs_match(got: dict, want: dict, graph: Graph, where: str, exact: bool = False) -> None:
    """Bit for bit where `exact` (and for booleans), else within the float16 tolerance; for a graph that branches on
    a threshold (Where), at most 0.5% of the samples (and one) beyond it, as a sample near the threshold may take the
    other branch when the hardware sums in another order."""
    branches = any(node.op is Op.WHERE for node in graph.nodes)
    for name, expected in want.items():
        actual, at = got[name], f"{where}:{name}"
        if exact or expected.dtype == bool:
            np.testing.assert_array_equal(actual, expected, err_msg=at)
        elif branches:
            batch = len(expected)
            apart = ~np.isclose(actual, expected, rtol=RTOL, atol=ATOL).reshape(batch, -1).all(axis=1)
            assert apart.sum() <= BRANCHED_SAMPLES * batch + 1, f"{at}: {apart.sum()} samples apart"
        else:
            np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL, err_msg=at)
