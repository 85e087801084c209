"""Packing constant parameters into one buffer: alignment, layouts, formats, and the round trip."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import InputError
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.integer import quantize_layer
from coopnn.layouts.pack import MATRIX_ALIGNMENT, VECTOR_ALIGNMENT, Layer, pack, unpack


def _params():
    rng = np.random.default_rng(0)
    constants = {"w0": rng.normal(size=(5, 3)), "b0": rng.normal(size=5), "w1": rng.normal(size=(2, 5)),
                 "c0": rng.normal(size=7)}
    roles = {"w0": "matrix", "b0": "vector", "w1": "matrix", "c0": "vector"}
    return {k: v.astype(np.float32) for k, v in constants.items()}, roles


@pytest.mark.parametrize("layout", ["row_major", "column_major"])
@pytest.mark.parametrize("fmt", ["fp32", "fp16"])
def test_round_trip_and_alignment(fmt, layout):
    constants, roles = _params()
    packed = pack(constants, roles, weight_format(fmt), layout)
    for name, array in constants.items():
        e = packed.entry(name)
        assert e.offset % (MATRIX_ALIGNMENT if roles[name] == "matrix" else VECTOR_ALIGNMENT) == 0
        want = array if fmt == "fp32" else array.astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(unpack(packed, name), want)
    offsets = sorted((e.offset, e.offset + e.size) for e in packed.entries.values())
    assert all(a[1] <= b[0] for a, b in zip(offsets, offsets[1:])), "entries overlap"
    assert len(packed.data) % 16 == 0 and len(packed.data) >= offsets[-1][1]


def test_strides_say_how_rows_or_columns_are_laid_out():
    constants, roles = _params()
    assert pack(constants, roles, weight_format("fp32"), "row_major").entry("w0").stride == 3 * 4
    assert pack(constants, roles, weight_format("fp16"), "column_major").entry("w0").stride == 5 * 2


def test_unknown_format_or_layout():
    constants, roles = _params()
    with pytest.raises(InputError, match="unknown weight format 'fp8'"):
        pack(constants, roles, weight_format("fp8"))
    with pytest.raises(ValueError, match="diagonal"):
        pack(constants, roles, weight_format("fp32"), "diagonal")


@pytest.mark.parametrize("layout", ["row_major", "column_major"])
@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
def test_scaled_formats_store_row_scales_after_each_matrix_and_biases_in_float16(fmt, layout):
    constants, roles = _params()
    f = weight_format(fmt)
    packed = pack(constants, roles, f, layout)
    for name, array in constants.items():
        e = packed.entry(name)
        elements, scales = f.stored(array, roles[name])
        if roles[name] == "vector":
            assert (e.dtype, e.scale_offset, e.size) == ("fp16", None, array.size * 2)
            np.testing.assert_array_equal(unpack(packed, name), array.astype(np.float16).astype(np.float32))
            continue
        assert (e.dtype, e.size) == (fmt, array.size) and e.scale_offset % VECTOR_ALIGNMENT == 0
        assert e.scale_offset >= e.offset + e.size
        raw = np.frombuffer(packed.data, np.float16, count=array.shape[0], offset=e.scale_offset)
        np.testing.assert_array_equal(raw.astype(np.float32), scales)
        np.testing.assert_array_equal(unpack(packed, name), f.decode(elements) * scales[:, None])
    spans = sorted([(e.offset, e.offset + e.size) for e in packed.entries.values()]
                   + [(e.scale_offset, e.scale_offset + 2 * e.shape[0]) for e in packed.entries.values()
                      if e.scale_offset is not None])
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "entries or scales overlap"


@pytest.mark.parametrize("layout", ["row_major", "column_major"])
def test_a_format_that_quantizes_inputs_stores_each_linear_as_one_entry(layout):
    constants, roles = _params()
    fmt = weight_format("int8")
    layers = {"linear:a": Layer(constants["w0"], constants["b0"], 0.02), "linear:b": Layer(constants["w1"], None, 3.0)}
    packed = pack({"c0": constants["c0"]}, roles, fmt, layout, layers=layers)
    assert set(packed.entries) == {"c0", "linear:a", "linear:b"}
    vector = packed.entry("c0")
    assert (vector.dtype, vector.layout, vector.size) == ("fp32", "vector", 7 * 4)
    np.testing.assert_array_equal(unpack(packed, "c0"), constants["c0"])
    spans = [(vector.offset, vector.offset + vector.size)]
    for name, layer in layers.items():
        e, rows = packed.entry(name), layer.matrix.shape[0]
        stored = quantize_layer(fmt, layer.matrix, layer.bias, layer.input_scale, name)
        elements = stored.elements.T if layout == "column_major" else stored.elements
        assert (e.dtype, e.layout, e.shape, e.size) == ("int8", layout, layer.matrix.shape, layer.matrix.size)
        assert e.offset % MATRIX_ALIGNMENT == 0 and e.stride == elements.shape[1]
        assert packed.data[e.offset:e.offset + e.size] == np.ascontiguousarray(elements).tobytes()
        assert packed.data[e.scale_offset:e.scale_offset + 4 * rows] == stored.dequantization.tobytes()
        assert packed.data[e.input_offset:e.input_offset + 4] == stored.multiplier.tobytes()
        assert e.input_scale == np.float32(layer.input_scale)
        spans += [(e.offset, e.offset + e.size), (e.scale_offset, e.scale_offset + 4 * rows),
                  (e.input_offset, e.input_offset + 4)]
        if layer.bias is None:
            assert e.bias_offset is None
        else:
            assert packed.data[e.bias_offset:e.bias_offset + 4 * rows] == stored.bias.tobytes()
            spans.append((e.bias_offset, e.bias_offset + 4 * rows))
        assert all(o % VECTOR_ALIGNMENT == 0 for o in (e.scale_offset, e.input_offset))
        # the weights come back up to the rounding of the dequantization scales
        np.testing.assert_allclose(unpack(packed, name), layer.matrix, atol=np.abs(layer.matrix).max() / 254 * 1.001)
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "entries overlap"
    with pytest.raises(ValueError, match="entry 'c0' packed twice"):
        pack({"c0": constants["c0"]}, roles, fmt, layout, layers={"c0": layers["linear:a"]})


@pytest.mark.parametrize("fmt, block_bytes", [("q8_0", 34), ("q4_0", 18)])
def test_a_block_format_stores_rows_of_ggml_blocks_and_float32_vectors(fmt, block_bytes):
    constants, roles = _params()
    constants["w2"] = np.random.default_rng(1).normal(size=(3, 70)).astype(np.float32)  # 3 blocks a row, padded
    roles["w2"] = "matrix"
    f = weight_format(fmt)
    packed = pack(constants, roles, f)
    for name, array in constants.items():
        e = packed.entry(name)
        if roles[name] == "vector":
            assert (e.dtype, e.size) == ("fp32", array.size * 4)
            np.testing.assert_array_equal(unpack(packed, name), array)
            continue
        rows, columns = array.shape
        blocks = -(-columns // 32)
        assert (e.dtype, e.layout, e.stride, e.size) == (fmt, "row_major", blocks * block_bytes,
                                                           rows * blocks * block_bytes)
        assert e.offset % MATRIX_ALIGNMENT == 0 and e.scale_offset is None
        assert packed.data[e.offset:e.offset + e.size] == f.encode(array).tobytes()
        np.testing.assert_array_equal(unpack(packed, name), f.emulate(array))
    with pytest.raises(ValueError, match=f"{fmt} stores blocks along rows: its matrices are row_major only"):
        pack(constants, roles, f, "column_major")
