"""Cooperative-vector weight plans and packing: float16 rounding, padding to 16-byte groups, plain layouts with their
strides, driver layouts through a converter, alignment of every entry."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.backends.coopvec.layouts import COMPONENT_ALIGNMENT, pack_plan, padded, plan_weights
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.pack import MATRIX_ALIGNMENT, VECTOR_ALIGNMENT, unpack


def _plan():
    rng = np.random.default_rng(0)
    matrices = {"w0": rng.normal(size=(64, 3)), "w1": rng.normal(size=(3, 64)), "w2": rng.normal(size=(16, 32))}
    biases = {"b0": rng.normal(size=64), "b1": rng.normal(size=3)}
    as32 = lambda d: {k: v.astype(np.float32) for k, v in d.items()}  # noqa: E731
    return as32(matrices), as32(biases), plan_weights(as32(matrices), as32(biases), FP16)


def test_padding_rounds_up_to_16_byte_groups_of_float16():
    assert COMPONENT_ALIGNMENT * 2 == 16
    assert [padded(n) for n in (1, 3, 8, 9, 64, 103)] == [8, 8, 8, 16, 64, 104]


def test_plan_rounds_to_float16_and_pads_with_zeros():
    matrices, biases, plan = _plan()
    w0 = plan.matrices["w0"]
    assert w0.dtype == np.float16 and w0.shape == (64, 8)
    np.testing.assert_array_equal(w0[:, :3], matrices["w0"].astype(np.float16))
    assert not w0[:, 3:].any()
    assert plan.matrices["w1"].shape == (8, 64) and not plan.matrices["w1"][3:].any()
    assert plan.biases["b1"].shape == (8,) and not plan.biases["b1"][3:].any()


@pytest.mark.parametrize("layout", ["row_major", "column_major"])
def test_plain_layouts_round_trip_with_16_byte_strides(layout):
    _, _, plan = _plan()
    packed = pack_plan(plan, layout)
    for name, matrix in plan.matrices.items():
        entry = packed.entry(name)
        assert entry.layout == layout and entry.dtype == "fp16" and entry.shape == matrix.shape
        assert entry.offset % MATRIX_ALIGNMENT == 0 and entry.stride % 16 == 0
        assert entry.stride == 2 * (matrix.shape[1] if layout == "row_major" else matrix.shape[0])
        np.testing.assert_array_equal(unpack(packed, name), matrix.astype(np.float32))
    for name, bias in plan.biases.items():
        assert packed.entry(name).offset % VECTOR_ALIGNMENT == 0 and packed.entry(name).layout == "vector"
        np.testing.assert_array_equal(unpack(packed, name), bias.astype(np.float32))


def test_driver_layout_takes_the_converters_bytes_at_aligned_offsets():
    _, _, plan = _plan()
    converted = {}

    def convert(matrix):
        # a stand-in driver whose optimal layout is the transpose with a 100-byte trailer
        raw = np.ascontiguousarray(matrix.T).tobytes() + bytes(range(100))
        converted[matrix.shape] = raw
        return raw

    packed = pack_plan(plan, "inferencing_optimal", convert)
    spans = []
    for name, matrix in plan.matrices.items():
        entry = packed.entry(name)
        assert entry.layout == "inferencing_optimal" and entry.offset % MATRIX_ALIGNMENT == 0 and entry.stride == 0
        assert packed.data[entry.offset:entry.offset + entry.size] == converted[matrix.shape]
        spans.append((entry.offset, entry.offset + entry.size))
    for name, bias in plan.biases.items():
        entry = packed.entry(name)
        assert entry.offset % VECTOR_ALIGNMENT == 0 and entry.size == bias.nbytes
        np.testing.assert_array_equal(unpack(packed, name), bias.astype(np.float32))
        spans.append((entry.offset, entry.offset + entry.size))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "entries overlap"
    assert len(packed.data) % 16 == 0 and len(packed.data) >= spans[-1][1]


def test_driver_layout_without_a_converter_and_unknown_layouts_are_refused():
    _, _, plan = _plan()
    with pytest.raises(ValueError, match="vkConvertCooperativeVectorMatrixNV"):
        pack_plan(plan, "inferencing_optimal")
    with pytest.raises(ValueError, match="diagonal"):
        pack_plan(plan, "diagonal")


def test_digest_follows_values_and_names():
    matrices, biases, plan = _plan()
    assert plan.digest() == plan_weights(matrices, biases, FP16).digest()
    nudged = dict(matrices, w2=matrices["w2"] + np.float32(0.5))
    assert plan_weights(nudged, biases, FP16).digest() != plan.digest()
    renamed = {("v" + k[1:]): v for k, v in matrices.items()}
    assert plan_weights(renamed, biases, FP16).digest() != plan.digest()
