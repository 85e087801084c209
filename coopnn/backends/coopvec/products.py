"""What the cooperative-vector target's matrix-vector products need: the weights they read, stored in the model's
format and padded (`weight_plan`), and what a device must offer to run them (`requirements`: the type combination
of `combination` and the longest cooperative vector)."""

from __future__ import annotations

from dataclasses import dataclass

from coopnn.backends.coopvec.layouts import WeightPlan, matrix_alignment, padded, plan_layers, plan_weights
from coopnn.backends.quantized_layers import LAYER_PREFIX, layer_weights
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.integer import quantize_layer
from coopnn.shaders.kernel.program import KernelProgram


def weight_plan(program: KernelProgram, weights: WeightFormat) -> WeightPlan:
    """The matrices and biases the program's `gemv` instructions read, and the parameter vectors of its `encode`
    instructions (a grid's tables) as vectors beside the biases, stored in format `weights` and padded (a format
    that quantizes inputs: each Linear quantized for its input scale)."""
    if weights.input_quantization is not None:
        return plan_layers({name: quantize_layer(weights, matrix, bias, scale, f"Linear {name[len(LAYER_PREFIX):]!r}")
                            for name, (matrix, bias, scale) in layer_weights(program, weights, "coopvec").items()},
                           weights)
    gemvs = [i for i in program.body if i.op == "gemv"]
    vectors = [i.args[2] for i in gemvs if len(i.args) > 2]
    vectors += [i.args[1] for i in program.body if i.op == "encode" and len(i.args) > 1]
    return plan_weights({i.args[0]: program.constants[i.args[0]] for i in gemvs},
                        {name: program.constants[name] for name in vectors}, weights)


@dataclass(frozen=True)
class Requirements:
    """What a device must offer to run a program: type combinations and cooperative-vector length."""

    combinations: frozenset[tuple[str, ...]]
    components: int  # the longest cooperative vector, padding included


def combination(weights: WeightFormat) -> tuple[str, ...]:
    """The type combination every matrix-vector product uses with weights in `weights`
    (vkGetPhysicalDeviceCooperativeVectorPropertiesNV's input type, input, matrix and bias interpretations, result
    type, by VkComponentTypeKHR name): a float16 input interpreted as the matrix's type, float16 bias and result; for
    a format that quantizes inputs, a float32 input quantized by the driver, 32-bit integer bias and result."""
    matrix = weights.component_type
    if weights.input_quantization is not None:
        return "FLOAT32", matrix, matrix, "SINT32", "SINT32"
    return "FLOAT16", matrix, matrix, weights.vectors.component_type, "FLOAT16"


def requirements(program: KernelProgram, weights: WeightFormat = FP16) -> Requirements:
    sizes = [i.type.size for i in program.body if i.type is not None and i.type.dtype != "bool"]
    gemvs = [program.param(i.args[0]).shape for i in program.body if i.op == "gemv"]
    sizes += [padded(n, matrix_alignment(weights)) for shape in gemvs for n in shape]
    return Requirements(frozenset({combination(weights)} if gemvs else ()), max(sizes, default=1))
