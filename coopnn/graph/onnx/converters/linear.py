"""Gemm and MatMul → IR GEMM and MATMUL (the fuse_linear pass, not the importer, turns them into LINEAR)."""

from __future__ import annotations

from coopnn.graph.ir import Op
from coopnn.graph.onnx.context import ConversionContext
from coopnn.graph.onnx.node import OnnxNode
from coopnn.graph.onnx.registry import converter


@converter("Gemm", since=(7, 9, 11, 13))
def gemm(node: OnnxNode, ctx: ConversionContext) -> None:
    operands = [node.input(0), node.input(1)] + ([node.input(2)] if node.input(2) else [])
    attrs = {
        "alpha": float(node.attr("alpha", 1.0)),
        "beta": float(node.attr("beta", 1.0)),
        "trans_a": int(node.attr("transA", 0)),
        "trans_b": int(node.attr("transB", 0)),
    }
    ctx.emit(Op.GEMM, operands, attrs, output=node.outputs[0])


@converter("MatMul", since=(1, 9, 13))
def matmul(node: OnnxNode, ctx: ConversionContext) -> None:
    ctx.emit(Op.MATMUL, [node.input(0), node.input(1)], output=node.outputs[0])
