"""The block formats q8_0 and q4_0 (`coopnn.layouts.formats.blocks`): their bytes read back as GGML's
dequantize_row_q8_0 and dequantize_row_q4_0 read them (ggml-org/llama.cpp, ggml/src/ggml-quants.c), written out
here byte by byte; rows padded with zeros to whole blocks; zero blocks; float32 biases; and weights a block cannot
hold refused with a CompileError naming the matrix, whether packed or emulated by the numpy backend."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import CompileError
from coopnn.graph.ir import Graph, Node, Op, Value
from coopnn.layouts.formats import weight_format
from coopnn.layouts.pack import pack
from coopnn.model import prepare

BLOCK_FORMATS = ["q8_0", "q4_0"]


def ggml_dequantize(name: str, raw: bytes) -> np.ndarray:
    """GGML's dequantize_row_<name>, block by block, from the bytes: d at bytes 0-1 (float16, little-endian), then
    the codes: Q8_0 32 int8 (y[j] = q[j] d), Q4_0 16 bytes (y[j] = ((qs[j] & 0x0F) - 8) d and
    y[j + 16] = ((qs[j] >> 4) - 8) d)."""
    size = {"q8_0": 34, "q4_0": 18}[name]
    values = []
    for start in range(0, len(raw), size):
        block = raw[start:start + size]
        d = np.frombuffer(block[:2], "<f2")[0].astype(np.float32)
        qs = block[2:]
        if name == "q8_0":
            codes = [int(q) - 256 if q > 127 else int(q) for q in qs]
        else:
            codes = [(q & 0x0F) - 8 for q in qs] + [(q >> 4) - 8 for q in qs]
        values += [np.float32(code) * d for code in codes]
    return np.array(values, np.float32)


@pytest.mark.parametrize("name", BLOCK_FORMATS)
def test_the_bytes_decode_as_ggml_dequantizes_them(name):
    fmt = weight_format(name)
    rng = np.random.default_rng(1)
    w = (rng.normal(size=(4, 64)) * np.array([[1e-6], [2.0 ** -20], [1.0], [3e4]])).astype(np.float32)
    stored = fmt.encode(w)
    assert stored.shape == (4, 2)
    for row in range(4):
        np.testing.assert_array_equal(ggml_dequantize(name, stored[row].tobytes()), fmt.emulate(w)[row])


@pytest.mark.parametrize("name", BLOCK_FORMATS)
def test_rows_are_padded_with_zeros_to_whole_blocks(name):
    fmt = weight_format(name)
    w = np.random.default_rng(2).normal(size=(3, 33)).astype(np.float32)
    padded = np.concatenate([w, np.zeros((3, 31), np.float32)], axis=1)
    assert fmt.encode(w).tobytes() == fmt.encode(padded).tobytes()
    assert fmt.emulate(w).shape == (3, 33)
    np.testing.assert_array_equal(fmt.emulate(w), fmt.emulate(padded)[:, :33])


def test_zero_blocks_are_ggmls():
    # Q8_0: d = 0 / 127 = +0, codes 0; Q4_0: GGML's max starts at +0 and stays there, d = +0 / -8 = -0 (0x8000),
    # codes 8 (weight 0); signed zeros among the weights change nothing
    for zeros in (np.zeros(32, np.float32), -np.zeros(32, np.float32)):
        assert weight_format("q8_0").encode(zeros).tobytes() == bytes(34)
        assert weight_format("q4_0").encode(zeros).tobytes() == bytes.fromhex("0080" + "88" * 16)
        for name in BLOCK_FORMATS:
            assert not weight_format(name).emulate(zeros).any()


@pytest.mark.parametrize("name", BLOCK_FORMATS)
def test_biases_are_float32(name):
    fmt = weight_format(name)
    b = np.array([1 / 3, -1e-30, 7e5], np.float32)
    elements, scales = fmt.stored(b, "vector")
    assert fmt.vectors.name == "fp32" and scales is None
    np.testing.assert_array_equal(elements, b)


def _linear(weight: np.ndarray) -> Graph:
    rows, cols = weight.shape
    x, y = Value("x", "f32", (None, cols)), Value("y", "f32", (None, rows))
    values = {"x": x, "y": y, "fc.weight": Value("fc.weight", "f32", weight.shape)}
    return Graph("g", (x,), (y,), (Node(Op.LINEAR, "fc", ("x", "fc.weight"), ("y",)),), values,
                 {"fc.weight": weight})


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("name", BLOCK_FORMATS)
def test_weights_that_are_not_finite_are_refused_naming_the_matrix(name, bad):
    w = np.ones((2, 40), np.float32)
    w[1, 35] = bad
    with pytest.raises(CompileError, match=rf"matrix 'w0' has weights that are not finite .*weights={name!r}"):
        pack({"w0": w}, {"w0": "matrix"}, weight_format(name))
    with pytest.raises(CompileError, match=rf"matrix 'fc.weight' has weights that are not finite .*weights={name!r}"):
        prepare(_linear(w), backend="numpy", weights=name)


@pytest.mark.parametrize("name, largest", [("q8_0", 127), ("q4_0", 8)])
def test_weights_beyond_a_float16_scale_are_refused_naming_the_matrix(name, largest):
    fmt = weight_format(name)
    w = np.ones((1, 32), np.float32)
    w[0, 3] = 65504 * largest  # the scale is float16's largest number: stored
    assert fmt.emulate(w)[0, 3] == w[0, 3]
    w[0, 3] = -65520 * largest  # the scale rounds to infinity
    with pytest.raises(CompileError, match=rf"matrix 'w0' has a weight of magnitude .* beyond .*weights={name!r}"):
        pack({"w0": w}, {"w0": "matrix"}, fmt)
    with pytest.raises(CompileError, match=r"matrix 'fc.weight' has a weight of magnitude"):
        prepare(_linear(w), backend="numpy", weights=name)
