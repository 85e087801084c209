"""A graph and inputs that show how a device converts a Linear's float16 input to an 8-bit float type, one value at a
time and exactly, whatever order its hardware sums products in."""

from __future__ import annotations

import numpy as np

from coopnn.graph.ir import Graph, Node, Op, Value

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
