"""coopnn.load turns bad model files into typed errors (the importer's own tests cover each case in depth)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import coopnn
from tests.conftest import ROOT

MLP = ROOT / "models" / "mlp_32_64x4_16.onnx"


def test_truncated_and_random_files(tmp_path):
    data = MLP.read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 3])
    (tmp_path / "noise.onnx").write_bytes(np.random.default_rng(0).bytes(4096))
    for name in ("cut.onnx", "noise.onnx"):
        with pytest.raises(coopnn.ModelFormatError):
            coopnn.load(tmp_path / name, backend="numpy")


def test_missing_file_is_a_model_format_error():
    with pytest.raises(coopnn.ModelFormatError, match="nope.onnx"):
        coopnn.load(ROOT / "nope.onnx", backend="numpy")


def test_conv_is_unsupported_with_node_name_and_opset():
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv_1")
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 6, 6])],
        [helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], np.zeros(108, np.float32))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(coopnn.UnsupportedOperatorError) as info:
        coopnn.load(model.SerializeToString(), backend="numpy")
    message = str(info.value)
    assert "'Conv'" in message and "conv_1" in message and "17" in message and "Gemm" in message


def test_not_a_model_object():
    with pytest.raises(coopnn.ModelFormatError):
        coopnn.load(12345, backend="numpy")
