"""Linears of a weight format that quantizes inputs (int8) as every backend stores them: one weight-buffer entry per
Linear node (`layer_entry`), as a Linear's integer bias and dequantization scales depend on its own input scale, and
layers with identical weights share kernel parameters but not input scales; and which products' NaN test an earlier
product's answers (`nan_inherited`)."""

from __future__ import annotations

import math

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


# Component-wise instructions that keep a NaN operand NaN in numpy's arithmetic (the emulation's) and make no NaN from
# numbers: unary ones, and ones whose other operands are constants (finite, and not 0 for "mul": infinity times 0 is
# NaN, and a product may overflow to infinity, which the others keep a number). "max" and "min" may take several
# operands that follow the same product (a leaky ReLU), as neither makes NaN of infinities.
_KEEPING_NAN_UNARY = frozenset({"neg", "abs", "tanh"})
_KEEPING_NAN_WITH_CONSTANTS = frozenset({"add", "sub", "mul", "max", "min"})


def nan_inherited(program: KernelProgram) -> dict[str, str]:
    """For each product (`gemv` result) whose input follows an earlier product through instructions that keep NaN
    and make none: that earlier product's result. Its input holds NaN exactly where the earlier product's sample is
    NaN (the integer arithmetic makes a product's row finite, or NaN in every row when its input held NaN), so the
    earlier product's NaN test answers its own (`coopnn.backends.coopvec.integer_product`)."""
    constants = {i.result: float(i.attrs["value"]) for i in program.body if i.op == "constant"}
    follows: dict[str, str] = {}  # value -> the product it follows
    inherited = {}
    for instr in program.body:
        if instr.op == "gemv":
            if instr.args[1] in follows:
                inherited[instr.result] = follows[instr.args[1]]
            follows[instr.result] = instr.result
            continue
        sources = {follows.get(a) for a in instr.args if a not in constants}
        if len(sources) != 1 or None in sources:
            continue
        if _keeps_nan(instr.op, [constants[a] for a in instr.args if a in constants], len(instr.args)):
            follows[instr.result] = sources.pop()
    return inherited


def _keeps_nan(op: str, constants: list[float], operands: int) -> bool:
    """Whether instruction `op` with these constant operands (of `operands` in all, the others following one product)
    keeps NaN and makes none."""
    if op in _KEEPING_NAN_UNARY:
        return True
    if op not in _KEEPING_NAN_WITH_CONSTANTS or not all(map(math.isfinite, constants)):
        return False
    if op in ("max", "min"):
        return True
    return operands == 2 and len(constants) == 1 and not (op == "mul" and constants[0] == 0)
