"""Linears of a weight format that quantizes inputs (int8) as every backend stores them: one weight-buffer entry per
Linear node (`layer_entry`), as a Linear's integer bias and dequantization scales depend on its own input scale, and
layers with identical weights share kernel parameters but not input scales."""

from __future__ import annotations

from coopnn.errors import CompileError
from coopnn.layouts.formats.format import WeightFormat
from coopnn.shaders.kernel.program import Instr, KernelProgram

LAYER_PREFIX = "linear:"  # kernel parameters are named w0, b1, c2, ...: a Linear's entry never takes one's name


def layer_entry(node: str) -> str:
    """The weight-buffer entry of Linear node `node`."""
    return LAYER_PREFIX + node


def product_layer(instr: Instr, target: str) -> str:
    """The Linear node a `gemv` computes; CompileError where it cannot be one in the integer arithmetic."""
    if instr.attrs.get("transpose"):
        raise CompileError(f"the {target} target trains in floating point; int8 weights are for inference")
    layer = instr.attrs.get("layer")
    if layer is None:
        raise CompileError("int8 weights need each product to name its Linear (a model's kernel program does)")
    return layer


def layer_weights(program: KernelProgram, weights: WeightFormat, target: str) -> dict[str, tuple]:
    """Each Linear's entry name -> (its weight matrix, its bias or None, its input scale), from the program's
    products."""
    layers = {}
    for instr in program.body:
        if instr.op == "gemv":
            layer = product_layer(instr, target)
            matrix, _, *bias = instr.args
            layers[layer_entry(layer)] = (program.constants[matrix], program.constants[bias[0]] if bias else None,
                                          weights.input_scale(layer))
    return layers
