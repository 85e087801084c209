"""Concat, Split, Slice and Gather along feature axes: skip connections, several encodings, several heads."""

import numpy as np
import pytest
from onnx import helper

from coopnn.errors import UnsupportedOperatorError
from coopnn.graph.ir import Op
from coopnn.graph.onnx import import_model

INT64_MAX = np.iinfo(np.int64).max


@pytest.mark.parametrize("opset, axis", [(4, 1), (11, 1), (11, -1), (13, -1)])  # negative axes since opset 11
def test_concat_of_inputs(onnx_model, check_import, axis, opset):
    node = helper.make_node("Concat", ["x", "z", "x"], ["y"], axis=axis)
    graph = check_import(onnx_model([node], {"x": ["N", 3], "z": ["N", 1]}, ["y"], opset=opset))
    assert graph.nodes[0].attrs["axis"] == 1


def test_concat_inner_axis_of_rank_3(onnx_model, check_import):
    node = helper.make_node("Concat", ["x", "z"], ["y"], axis=-2)
    check_import(onnx_model([node], {"x": ["N", 2, 3], "z": ["N", 4, 3]}, ["y"]))


def test_concat_along_the_batch_is_unsupported(onnx_model):
    node = helper.make_node("Concat", ["x", "z"], ["y"], axis=0, name="cat0")
    with pytest.raises(UnsupportedOperatorError, match="cat0.*batch axis"):
        import_model(onnx_model([node], {"x": ["N", 3], "z": ["N", 3]}, ["y"]))


def _split_model(onnx_model, opset, sizes, axis=1, use_attribute=None, num_outputs=None, outputs=3):
    names = [f"y{i}" for i in range(outputs)]
    attrs = {"axis": axis}
    inputs, constants = ["x"], {}
    if sizes is not None and (use_attribute or opset < 13):
        attrs["split"] = sizes
    elif sizes is not None:
        inputs.append("split")
        constants["split"] = np.int64(sizes)
    if num_outputs is not None:
        attrs["num_outputs"] = num_outputs
    node = helper.make_node("Split", inputs, names, **attrs)
    return onnx_model([node], {"x": ["N", 7, 2]}, names, constants, opset=opset)


@pytest.mark.parametrize("opset", [2, 11, 13, 18])
def test_split_with_sizes(onnx_model, check_import, opset):
    graph = check_import(_split_model(onnx_model, opset, [1, 4, 2], axis=1 if opset < 11 else -2))
    assert [n.op for n in graph.nodes] == [Op.SLICE] * 3
    assert [(n.attrs["start"], n.attrs["stop"]) for n in graph.nodes] == [(0, 1), (1, 5), (5, 7)]


def test_split_into_equal_parts(onnx_model, check_import):
    names = ["a", "b"]
    node = helper.make_node("Split", ["x"], names, axis=-1)
    check_import(onnx_model([node], {"x": ["N", 6]}, names))


def test_split_num_outputs_opset_18_leaves_the_last_part_smaller(onnx_model, check_import):
    graph = check_import(_split_model(onnx_model, 18, None, num_outputs=3))
    assert [n.outputs[0] for n in graph.nodes] == ["y0", "y1", "y2"]
    assert [n.attrs["stop"] - n.attrs["start"] for n in graph.nodes] == [3, 3, 1]


def test_split_along_the_batch_is_unsupported(onnx_model):
    node = helper.make_node("Split", ["x"], ["a", "b"], axis=0, name="split0")
    with pytest.raises(UnsupportedOperatorError, match="split0.*batch"):
        import_model(onnx_model([node], {"x": ["N", 4]}, {"a": ["N", 4], "b": ["N", 4]}))


SLICES = [  # starts, ends, axes, steps on x[N, 6, 5]
    ([1], [4], [1], None),
    ([0, 1], [3, -1], [1, 2], None),
    ([-1], [-INT64_MAX], [1], [-1]),
    ([5], [0], [-2], [-2]),
    ([0, 2], [INT64_MAX, 5], [0, 2], [1, 1]),  # all of the batch, as exporters write x[:, 2:5]
    ([2], [INT64_MAX], [2], [2]),
    ([10], [20], [1], None),  # empty
]


@pytest.mark.parametrize("opset, starts, ends, axes, steps", [
    (opset, *case) for case in SLICES for opset in (10, 11, 13) if opset >= 11 or min(case[2]) >= 0
])
def test_slice_with_inputs(onnx_model, check_import, opset, starts, ends, axes, steps):
    inputs = ["x", "starts", "ends", "axes"] + (["steps"] if steps else [])
    constants = {"starts": np.int64(starts), "ends": np.int64(ends), "axes": np.int64(axes)}
    if steps:
        constants["steps"] = np.int64(steps)
    node = helper.make_node("Slice", inputs, ["y"])
    graph = check_import(onnx_model([node], {"x": ["N", 6, 5]}, ["y"], constants, opset=opset))
    assert all(n.attrs["axis"] > 0 for n in graph.nodes if n.op is Op.SLICE)


def test_slice_without_axes_defaults_to_the_leading_ones(onnx_model, check_import):
    node = helper.make_node("Slice", ["x", "starts", "ends"], ["y"])
    constants = {"starts": np.int64([0, 1]), "ends": np.int64([INT64_MAX, 3])}
    check_import(onnx_model([node], {"x": ["N", 6]}, ["y"], constants))


@pytest.mark.parametrize("axes", [[1], None])
def test_slice_with_attributes_opset_1(onnx_model, check_import, axes):
    starts, ends = ([1], [3]) if axes else ([0, 1], [INT64_MAX, 3])
    node = helper.make_node("Slice", ["x"], ["y"], starts=starts, ends=ends, **({"axes": axes} if axes else {}))
    check_import(onnx_model([node], {"x": ["N", 4]}, ["y"], opset=9))


def test_slicing_the_batch_is_unsupported(onnx_model):
    node = helper.make_node("Slice", ["x", "starts", "ends"], ["y"], name="cut")
    constants = {"starts": np.int64([1]), "ends": np.int64([3])}
    with pytest.raises(UnsupportedOperatorError, match="cut.*batch axis"):
        import_model(onnx_model([node], {"x": ["N", 4]}, ["y"], constants))


GATHER_INDICES = [np.int64(0), np.int64(-1), np.int64([2, 0, 1, 3]), np.int64([[1, 2], [3, 3]])]


@pytest.mark.parametrize("opset, indices", [
    (opset, i) for i in GATHER_INDICES for opset in (1, 11, 13) if opset >= 11 or (i >= 0).all()
])
def test_gather_on_a_feature_axis(onnx_model, check_import, indices, opset):
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    check_import(onnx_model([node], {"x": ["N", 4, 2]}, ["y"], {"i": indices}, opset=opset))


def test_gather_of_consecutive_indices_is_one_slice(onnx_model, check_import):
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=-1)
    graph = check_import(onnx_model([node], {"x": ["N", 6]}, ["y"], {"i": np.int64([2, 3, 4])}))
    assert [n.op for n in graph.nodes] == [Op.SLICE]


def test_gather_along_the_batch_is_unsupported(onnx_model):
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0, name="rows")
    with pytest.raises(UnsupportedOperatorError, match="rows.*batch axis"):
        import_model(onnx_model([node], {"x": ["N", 4]}, ["y"], {"i": np.int64([0])}))


def test_gather_with_indices_computed_at_run_time_is_unsupported(onnx_model):
    nodes = [
        helper.make_node("ArgMax", ["x"], ["i"], axis=1, keepdims=0),
        helper.make_node("Gather", ["x", "i"], ["y"], axis=1),
    ]
    with pytest.raises(UnsupportedOperatorError, match="ArgMax"):
        import_model(onnx_model(nodes, {"x": ["N", 4]}, ["y"]))
