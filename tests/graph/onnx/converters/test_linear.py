"""Gemm and MatMul import as IR GEMM and MATMUL nodes and match onnxruntime."""

import numpy as np
import pytest
from onnx import helper

from coopnn.errors import UnsupportedOperatorError
from coopnn.graph.ir import Op
from coopnn.graph.onnx import import_model

RNG = np.random.default_rng(1)
W = RNG.standard_normal((4, 3)).astype(np.float32)  # [out, in], as torch stores Linear weights
B = RNG.standard_normal(4).astype(np.float32)


@pytest.mark.parametrize("opset", [7, 9, 11, 13, 18])
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (0.5, 2.0)])
def test_gemm_with_transposed_weight(onnx_model, check_import, opset, alpha, beta):
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], alpha=alpha, beta=beta, transB=1)
    graph = check_import(onnx_model([node], {"x": ["N", 3]}, ["y"], {"w": W, "b": B}, opset=opset))
    assert [n.op for n in graph.nodes] == [Op.GEMM]
    assert dict(graph.nodes[0].attrs) == {"alpha": alpha, "beta": beta, "trans_a": 0, "trans_b": 1}


@pytest.mark.parametrize("bias_shape", [(), (1,), (4,), (1, 4)])
def test_gemm_bias_broadcasts(onnx_model, check_import, bias_shape):
    bias = RNG.standard_normal(bias_shape).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"])
    check_import(onnx_model([node], {"x": ["N", 3]}, ["y"], {"w": W.T.copy(), "b": bias}))


def test_gemm_without_bias_from_opset_11(onnx_model, check_import):
    node = helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)
    graph = check_import(onnx_model([node], {"x": ["N", 3]}, ["y"], {"w": W}, opset=11))
    assert graph.nodes[0].inputs == ("x", "w")


def test_gemm_transposing_the_batched_operand_is_unsupported(onnx_model):
    node = helper.make_node("Gemm", ["x", "w"], ["y"], transA=1, name="gemm_t")
    with pytest.raises(UnsupportedOperatorError, match="gemm_t"):
        import_model(onnx_model([node], {"x": [5, 3]}, ["y"], {"w": np.ones((5, 4), np.float32)}))


@pytest.mark.parametrize("opset", [9, 13])
@pytest.mark.parametrize("shape", [["N", 3], ["N", 2, 3]])
def test_matmul_with_constant_matrix(onnx_model, check_import, opset, shape):
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = check_import(onnx_model([node], {"x": shape}, ["y"], {"w": W.T.copy()}, opset=opset))
    assert [n.op for n in graph.nodes] == [Op.MATMUL]


def test_matmul_of_two_batched_values_is_unsupported(onnx_model):
    node = helper.make_node("MatMul", ["x", "z"], ["y"], name="mm")
    with pytest.raises(UnsupportedOperatorError, match=r"'MatMul' \(node 'mm', opset 13\)"):
        import_model(onnx_model([node], {"x": ["N", 3], "z": ["N", 3]}, ["y"]))
