"""Weight formats that quantize inputs (int8) on the portable target: each Linear of the model packed as one entry
of the weight buffer (`coopnn.layouts.pack.Layer`, named
`coopnn.backends.quantized_layers.layer_entry(node)`), and each `gemv` lowered to the integer
arithmetic of `coopnn.layouts.formats.integer`, step by step: the input quantized once per product, 32-bit integer
products summed in column order (exact in any order), the integer bias added, the sum converted to float32 and
multiplied by the row's dequantization scale, NaN for a sample with NaN among the inputs. It matches the numpy
backend bit for bit; the operators around it are the target's float32 ones.
"""

from __future__ import annotations

from coopnn.backends.quantized_layers import layer_entry, layer_weights, product_layer
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import Layer, WeightImage, pack
from coopnn.shaders.kernel.program import Instr, KernelProgram
from coopnn.shaders.targets.integer_words import IntegerWords


def pack_layers(program: KernelProgram, weights: WeightFormat) -> WeightImage:
    """The program's weights in `weights`: one entry per Linear, and the constant vectors other instructions load
    (a bias only a product reads is stored in its Linear's entry)."""
    roles = {p.name: p.role for p in program.params_of("matrix", "vector")}
    loaded = {instr.args[0] for instr in program.body if instr.op == "load"}
    layers = {name: Layer(*stored) for name, stored in layer_weights(program, weights, "portable").items()}
    constants = {name: program.constants[name] for name in roles if name in loaded}
    return pack(constants, roles, weights, layers=layers)


def integer_gemv(emitter, instr: Instr) -> None:
    """`instr` (a gemv) in the integer arithmetic, into `emitter` (a `PortableEmitter`)."""
    entry = emitter.packed.entry(layer_entry(product_layer(instr, "portable")))
    x = instr.args[1]
    rows, cols = entry.shape
    frame, fn, m = emitter.frame, emitter.fn, emitter.m
    words = IntegerWords(frame)
    u32, s32, f32, bool_ = frame.u32, words.s32, frame.f32, frame.bool
    multiplier = words.float32(entry.input_offset, frame.zero)
    quantized = fn.variable(m.type_array(s32, frame.uint(cols)), name="q")
    has_nan = fn.variable(bool_, name="nan")
    element = m.type_pointer("Function", s32)
    largest = int(emitter.weights.input_quantization.largest)
    fn.ops.store(has_nan, m.constant(bool_, False))
    with fn.for_range(frame.zero, frame.uint(cols)) as c:
        value = emitter.component(x, c)
        fn.ops.store(fn.ops.access_chain(element, quantized, c), words.quantize(value, multiplier, largest))
        fn.ops.store(has_nan, fn.ops.logical_or(bool_, fn.ops.load(bool_, has_nan), fn.ops.is_nan(bool_, value)))
    any_nan = fn.ops.load(bool_, has_nan)
    accumulator = fn.variable(s32, name="iacc")
    emitter.new_array(instr.result)
    with fn.for_range(frame.zero, frame.uint(rows)) as r:
        fn.ops.store(accumulator, m.constant(s32, 0))
        row = fn.ops.int_mul(u32, r, frame.uint(cols))
        with fn.for_range(frame.zero, frame.uint(cols)) as c:
            weight = words.int8(entry.offset, fn.ops.int_add(u32, row, c))
            product = fn.ops.int_mul(s32, weight,
                                     fn.ops.load(s32, fn.ops.access_chain(element, quantized, c)))
            fn.ops.store(accumulator, fn.ops.int_add(s32, fn.ops.load(s32, accumulator), product))
        total = fn.ops.load(s32, accumulator)
        if entry.bias_offset is not None:
            total = fn.ops.int_add(s32, total, words.int32(entry.bias_offset, r))
        y = fn.ops.float_mul(f32, fn.ops.int_to_float(f32, total), words.float32(entry.scale_offset, r))
        emitter.store_component(instr.result, r, fn.ops.select(f32, any_nan, words.nan(), y))
