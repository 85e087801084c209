"""A Linear of a format that quantizes inputs (int8) on the cooperative-vector target, in the integer arithmetic of
`coopnn.layouts.formats.integer`, using the combination `f32/s8/s8/s32/s32`:

1. the float32 input times the Linear's multiplier m (OpVectorTimesScalar: correctly rounded), clamped to
   [-127, 127] (NClamp, defined for NaN), then handed to the product as float32 interpreted as SignedInt8: the
   driver's conversion rounds to nearest even (SPV_NV_cooperative_vector: "Float to integer conversion is
   round-to-nearest-even and saturating"), so q is the emulation's exactly;
2. and 3. OpCooperativeVectorMatrixMulAddNV with 8-bit integer matrix, 32-bit integer bias and result (exact in any
   order), converted to float32 (OpConvertSToF, to nearest even) and multiplied by the dequantization scales;
4. a sample with NaN among its inputs gets NaN in every row: the result times NaN (else times 1, which keeps it).
   The test takes the vector apart component by component (OpIsNan, or-ed), the costliest step of the product; so
   a product whose input follows an earlier product through instructions that keep NaN and make none
   (`nan_inherited`: a ReLU, say) takes the earlier product's factor instead, which gives the same rows and halves
   the time of a deep model (`bench/results/nvidia-h100-80gb-hbm3-2026-11-27-weight-formats.md` against
   `...-2026-11-25-weight-formats.md`). Or-ing the flags in a tree or testing the integer bits made no difference,
   and a float16 product of the NaN flags with rows of zeros (which does not take the vector apart) was slower.

The float32 input is kept over the packed one (`u32/s8packed/s8/s32/s32`: the shader rounds and narrows the vector,
four bytes a 32-bit word), which was slower: the vector has to go through workgroup memory to be repacked, since
cooperative vectors cannot be bitcast to fewer components
(`bench/results/nvidia-h100-80gb-hbm3-2026-11-27-int8-packed-input.md`).

Bit for bit the numpy backend's arithmetic; the operators around it are the target's float32 ones.
"""

from __future__ import annotations

import numpy as np

from coopnn.backends.coopvec.layouts import LAYOUT_ENUMERANTS
from coopnn.backends.coopvec.values import Held
from coopnn.backends.quantized_layers import layer_entry, product_layer
from coopnn.shaders.kernel.program import Instr
from coopnn.shaders.spirv.ops import Ops


def integer_gemv(emitter, instr: Instr) -> Held:
    """`instr` (a gemv) in the integer arithmetic, into `emitter` (a `CoopvecEmitter`)."""
    entry = emitter.packed.entry(layer_entry(product_layer(instr, "coopvec")))
    rows, columns = entry.shape
    m, fn, forms = emitter.m, emitter.fn, emitter.forms
    f32, boolean = forms.scalar_types["f32"], forms.scalar_types["bool"]
    inputs, results = forms.vector_type("f32", columns), forms.vector_type("f32", rows)
    x = emitter.held[instr.args[1]]
    components = forms.components(x, "f32")
    padding = [forms.constant("f32", 0.0)] * (columns - x.size)
    vector = fn.ops.construct(inputs, *components, *padding) if padding else forms.vector(x, "f32")
    multiplier = np.float32(1) / np.float32(entry.input_scale)
    largest = float(emitter.weights.input_quantization.largest)
    scaled = fn.ops.vector_times_scalar(inputs, vector, forms.constant("f32", multiplier))
    quantized = emitter.glsl(inputs, "NClamp", scaled, m.constant(inputs, [forms.constant("f32", -largest)] * columns),
                             m.constant(inputs, [forms.constant("f32", largest)] * columns))

    def interpretation(name: str):
        return m.enum_constant("ComponentType", name)

    weights = emitter.array_pointer(0)
    operands = [quantized, interpretation("SignedInt8NV"), weights, emitter.uint(entry.offset),
                interpretation("SignedInt8NV")]
    if entry.bias_offset is not None:
        operands += [weights, emitter.uint(entry.bias_offset), interpretation("SignedInt32NV")]
    operands += [emitter.uint(rows), emitter.uint(columns),
                 m.enum_constant("CooperativeVectorMatrixLayout", LAYOUT_ENUMERANTS[entry.layout]),
                 m.constant(boolean, False)]
    # the stride (ignored by the optimal layouts) comes before the operand that makes the result signed
    operands.append(emitter.uint(entry.stride))
    product = Ops.vector_matrix_mul_add if entry.bias_offset is not None else Ops.vector_matrix_mul
    sums = product(fn.ops, m.type_cooperative_vector_nv(m.type_int(32, True), rows), *operands,
                   "MatrixResultSignedComponentsKHR")
    # the load reads bytes at an offset whatever the array's element type (float16 here), as the product does
    dequantization = fn.ops.vector_load(results, weights, emitter.uint(entry.scale_offset))
    y = fn.ops.float_mul(results, fn.ops.int_to_float(results, sums), dequantization)
    inherited = emitter.nan_inherited.get(instr.result)
    if inherited is not None:
        factor = emitter.nan_factors[inherited]
    else:
        any_nan = fn.ops.is_nan(boolean, components[0])
        for component in components[1:]:
            any_nan = fn.ops.logical_or(boolean, any_nan, fn.ops.is_nan(boolean, component))
        factor = fn.ops.select(f32, any_nan, forms.constant("f32", float("nan")), forms.constant("f32", 1.0))
    emitter.nan_factors[instr.result] = factor
    y = fn.ops.vector_times_scalar(results, y, factor)
    if rows == instr.type.size:
        return emitter.vector_result(instr, "f32", y)
    return forms.from_scalars("f32", [fn.ops.extract(f32, y, i) for i in range(instr.type.size)])
