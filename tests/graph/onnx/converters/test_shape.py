"""Reshape, Flatten, Unsqueeze, Squeeze, Expand, Transpose and Shape, including targets computed from Shape."""

import numpy as np
import pytest
from onnx import helper

from coopnn.errors import UnsupportedOperatorError
from coopnn.graph.ir import Op
from coopnn.graph.onnx import import_model

FREQS = np.float32([1.0, 2.0, 4.0, 8.0])


def _encoding(head):
    """x[N, 3] → unsqueeze → * freqs → [N, 3, 4]; `head` nodes flatten it into "flat" [N, 12]; then sin."""
    return [
        helper.make_node("Unsqueeze", ["x", "last"], ["u"]),
        helper.make_node("Mul", ["u", "freqs"], ["scaled"]),
        *head,
        helper.make_node("Sin", ["flat"], ["y"]),
    ]


CONSTANTS = {"freqs": FREQS, "last": np.int64([-1])}


@pytest.mark.parametrize("target, allowzero", [([-1, 12], 0), ([-1, 12], 1), ([0, -1], 0), ([0, 12], 0)])
def test_reshape_with_constant_target(onnx_model, check_import, target, allowzero):
    nodes = _encoding([helper.make_node("Reshape", ["scaled", "shape"], ["flat"], allowzero=allowzero)])
    model = onnx_model(nodes, {"x": ["N", 3]}, ["y"], {**CONSTANTS, "shape": np.int64(target)}, opset=14)
    graph = check_import(model)
    reshapes = [n for n in graph.nodes if n.op is Op.RESHAPE]
    assert [n.attrs["shape"] for n in reshapes] == [(None, 3, 1), (None, 12)]


@pytest.mark.parametrize("opset", [13, 17])
def test_reshape_with_target_computed_from_shape(onnx_model, check_import, opset):
    """The legacy exporter's x.reshape(x.shape[0], -1): Shape → Gather → Unsqueeze → Concat."""
    head = [
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Gather", ["x_shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "first"], ["batch_1d"]),
        helper.make_node("Concat", ["batch_1d", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["scaled", "target"], ["flat"]),
    ]
    constants = {**CONSTANTS, "zero": np.int64(0), "first": np.int64([0]), "minus_one": np.int64([-1])}
    graph = check_import(onnx_model(_encoding(head), {"x": ["N", 3]}, {"y": ["N", 12]}, constants, opset=opset))
    assert [n.op for n in graph.nodes] == [Op.RESHAPE, Op.MUL, Op.RESHAPE, Op.SIN]
    assert graph.constants.keys() == {"freqs"}


def test_reshape_with_product_of_feature_sizes(onnx_model, check_import):
    """y.reshape(y.shape[0], y.shape[1] * y.shape[2]) as the legacy exporter writes it."""
    head = [helper.make_node("Shape", ["scaled"], ["s"])]
    for axis in range(3):
        head.append(helper.make_node("Gather", ["s", f"i{axis}"], [f"d{axis}"], axis=0))
    head += [
        helper.make_node("Mul", ["d1", "d2"], ["features"]),
        helper.make_node("Unsqueeze", ["d0", "first"], ["b"]),
        helper.make_node("Unsqueeze", ["features", "first"], ["f"]),
        helper.make_node("Concat", ["b", "f"], ["target"], axis=0),
        helper.make_node("Reshape", ["scaled", "target"], ["flat"]),
    ]
    constants = {**CONSTANTS, "first": np.int64([0]), **{f"i{a}": np.int64(a) for a in range(3)}}
    check_import(onnx_model(_encoding(head), {"x": ["N", 3]}, {"y": ["N", 12]}, constants))


def test_reshape_keeping_the_leading_axes(onnx_model, check_import):
    """y.reshape(*y.shape[:-2], -1): Shape → Slice → Concat."""
    head = [
        helper.make_node("Shape", ["scaled"], ["s"]),
        helper.make_node("Slice", ["s", "start", "stop"], ["lead"]),
        helper.make_node("Concat", ["lead", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["scaled", "target"], ["flat"]),
    ]
    constants = {**CONSTANTS, "start": np.int64([0]), "stop": np.int64([-2]), "minus_one": np.int64([-1])}
    check_import(onnx_model(_encoding(head), {"x": ["N", 3]}, {"y": ["N", 12]}, constants))


@pytest.mark.parametrize("target", [[12, -1], [-1, 6], [3, -1, 4]])
def test_reshape_that_mixes_samples_is_unsupported(onnx_model, target):
    nodes = _encoding([helper.make_node("Reshape", ["scaled", "shape"], ["flat"], name="mix")])
    model = onnx_model(nodes, {"x": ["N", 3]}, ["y"], {**CONSTANTS, "shape": np.int64(target)})
    with pytest.raises(UnsupportedOperatorError, match="'Reshape' \\(node 'mix'"):
        import_model(model)


def test_reshape_target_computed_at_run_time_is_unsupported(onnx_model):
    nodes = [
        helper.make_node("Cast", ["x"], ["xi"], to=7, name="to_int"),
        helper.make_node("Reshape", ["x", "xi"], ["y"]),
    ]
    with pytest.raises(UnsupportedOperatorError, match="to_int.*computed at run time to INT64"):
        import_model(onnx_model(nodes, {"x": ["N", 2]}, {"y": ["N", 2]}))


@pytest.mark.parametrize("opset", [9, 13, 21])
@pytest.mark.parametrize("axis", [1, -2])
def test_flatten(onnx_model, check_import, opset, axis):
    nodes = _encoding([helper.make_node("Flatten", ["scaled"], ["flat"], axis=axis)])
    graph = check_import(onnx_model(nodes, {"x": ["N", 3]}, ["y"], CONSTANTS, opset=max(opset, 13)))
    assert graph.nodes[-2].attrs["shape"] == (None, 12)


def test_flatten_across_the_batch_is_unsupported(onnx_model):
    node = helper.make_node("Flatten", ["x"], ["y"], axis=2, name="flat2")
    with pytest.raises(UnsupportedOperatorError, match="flat2.*mixes the batch axis"):
        import_model(onnx_model([node], {"x": ["N", 3, 4]}, ["y"]))


@pytest.mark.parametrize("axes", [[1], [-1], [1, 3]])
def test_unsqueeze_axes_attribute_opset_11(onnx_model, check_import, axes):
    node = helper.make_node("Unsqueeze", ["x"], ["y"], axes=axes)
    check_import(onnx_model([node], {"x": ["N", 3]}, ["y"], opset=11))


@pytest.mark.parametrize("axes", [[1], [-1], [1, 3]])
def test_unsqueeze_axes_input_opset_13(onnx_model, check_import, axes):
    node = helper.make_node("Unsqueeze", ["x", "axes"], ["y"])
    check_import(onnx_model([node], {"x": ["N", 3]}, ["y"], {"axes": np.int64(axes)}, opset=13))


def test_unsqueeze_in_front_of_the_batch_is_unsupported(onnx_model):
    node = helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="front")
    with pytest.raises(UnsupportedOperatorError, match="front"):
        import_model(onnx_model([node], {"x": ["N", 3]}, ["y"], {"axes": np.int64([0])}))


@pytest.mark.parametrize("opset, axes, out_shape", [
    (11, [1], ["N", 3, 1]), (11, None, ["N", 3]), (13, [-1], ["N", 1, 3]), (13, None, ["N", 3]), (21, [1, 3], ["N", 3]),
])
def test_squeeze(onnx_model, check_import, opset, axes, out_shape):
    if opset >= 13 and axes is not None:
        node = helper.make_node("Squeeze", ["x", "axes"], ["y"])
        constants = {"axes": np.int64(axes)}
    else:
        node = helper.make_node("Squeeze", ["x"], ["y"], **({} if axes is None else {"axes": axes}))
        constants = {}
    graph = check_import(onnx_model([node], {"x": ["N", 1, 3, 1]}, {"y": out_shape}, constants, opset=opset))
    assert graph.outputs[0].shape == (None, *out_shape[1:])


def test_squeeze_of_a_wide_axis_is_unsupported(onnx_model):
    nodes = [  # axes behind an Identity: ONNX shape inference cannot see them, the importer can
        helper.make_node("Identity", ["axes"], ["axes_copy"]),
        helper.make_node("Squeeze", ["x", "axes_copy"], ["y"], name="sq"),
    ]
    with pytest.raises(UnsupportedOperatorError, match="sq.*not 1"):
        import_model(onnx_model(nodes, {"x": ["N", 3]}, {"y": ["N"]}, {"axes": np.int64([1])}))


@pytest.mark.parametrize("perm", [[0, 2, 1], [0, 1, 2], [0, 3, 1, 2]])
def test_transpose_keeps_the_batch_first(onnx_model, check_import, perm):
    node = helper.make_node("Transpose", ["x"], ["y"], perm=perm)
    shape = ["N", 2, 3, 4][: len(perm)]
    graph = check_import(onnx_model([node], {"x": shape}, ["y"]))
    assert graph.nodes[0].attrs["perm"] == tuple(perm)


def test_transpose_moving_the_batch_is_unsupported(onnx_model):
    node = helper.make_node("Transpose", ["x"], ["y"], name="t")
    with pytest.raises(UnsupportedOperatorError, match="'t'.*may not move the batch axis"):
        import_model(onnx_model([node], {"x": ["N", 3]}, ["y"]))


def test_expand_to_the_input_shape(onnx_model, check_import):
    """F.normalize as the legacy exporter writes it: the clamped norm expanded to Shape(x)."""
    nodes = [
        helper.make_node("ReduceL2", ["x"], ["norm"], axes=[-1], keepdims=1),
        helper.make_node("Clip", ["norm", "eps"], ["clamped"]),
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Expand", ["clamped", "x_shape"], ["wide"]),
        helper.make_node("Div", ["x", "wide"], ["y"]),
    ]
    graph = check_import(onnx_model(nodes, {"x": ["N", 3]}, ["y"], {"eps": np.float32(1e-12)}))
    assert Op.MUL in [n.op for n in graph.nodes]


@pytest.mark.parametrize("target", [[1, 4], [4], [1, 3, 4]])
def test_expand_with_constant_target(onnx_model, check_import, target):
    node = helper.make_node("Expand", ["x", "shape"], ["y"])
    shape = ["N", 3, 1] if len(target) == 3 else ["N", 1]
    check_import(onnx_model([node], {"x": shape}, ["y"], {"shape": np.int64(target)}))


def test_expand_of_a_constant_then_added(onnx_model, check_import):
    nodes = [
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Expand", ["c", "x_shape"], ["wide"]),
        helper.make_node("Add", ["x", "wide"], ["y"]),
    ]
    check_import(onnx_model(nodes, {"x": ["N", 3]}, ["y"], {"c": np.float32([[1, 2, 3]])}))


@pytest.mark.parametrize("start, end", [(0, None), (1, None), (-1, None), (0, 1), (1, -1)])
def test_shape_with_start_and_end(onnx_model, check_import, start, end):
    attrs = {"start": start, **({} if end is None else {"end": end})}
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], **attrs),
        helper.make_node("Cast", ["s"], ["sf"], to=1),
        helper.make_node("ReduceSum", ["sf"], ["total"], keepdims=1),
        helper.make_node("Mul", ["x", "total"], ["y"]),
    ]
    model = onnx_model(nodes, {"x": ["N", 2, 3, 4]}, ["y"], opset=15)
    if start == 0:  # the batch size is only known at run time: it cannot become a float constant
        with pytest.raises(UnsupportedOperatorError, match="batch size"):
            import_model(model)
    else:
        graph = check_import(model)
        np.testing.assert_array_equal(graph.constants["total"], np.float32([sum([0, 2, 3, 4][start:end])]))
