"""Small complete compute shaders using SPV_NV_cooperative_matrix2 and SPV_NV_tensor_addressing through the builder
(cooperative_matrix2.py), shared by the validation and golden tests: tensor layouts and views, tensor loads and
stores, per-element operations, reductions, conversions and transposes, and decode functions for llama.cpp's Q8_0
(an f16 scale and 32 int8 a block) and Q4_0 (an f16 scale and 16 bytes of nibbles) with a DecodeVectorFunc."""

from __future__ import annotations

from coopnn.shaders.spirv import Module
from coopnn.shaders.spirv.cooperative_matrix2 import (
    TensorLayoutValue, TensorViewValue, combine_function, convert, decode_function, load_tensor, per_element_function,
    store_tensor)

M, K, N = 16, 32, 16  # A is M x K, B is K x N
BLOCK = 32  # elements of a Q8_0 or Q4_0 block
REDUCTIONS = {"Row": (M, 1), "Column": (1, N), ("Row", "Column"): (1, 1), "2x2": (M // 2, N // 2)}


def _halves_buffer(m: Module, binding: int, name: str):
    f16 = m.type_float(16)
    block = m.type_struct([m.type_runtime_array(f16, stride=2)], offsets=[0], decorations=["Block"], name="Halves")
    variable = m.global_variable("StorageBuffer", block, name=name,
                                 decorations=[("DescriptorSet", 0), ("Binding", binding)])
    return m.type_pointer("StorageBuffer", f16), variable


def tensor_addressing_shader(scope: str = "Subgroup") -> Module:
    """One layer on tensor-addressed matrices: A through a ragged-tail layout (Constant clamp), B = W^T through a
    transposing view, the bias broadcast over the rows by a view with strides (0, 1), a per-element leaky ReLU,
    the four reductions, conversions to A and B with and without a component change, and stores through a layout and
    a clipped view. `scope` "Workgroup" makes workgroup-scope matrices (128 invocations, LocalSizeId)."""
    m = Module()
    f16, f32, u32 = m.type_float(16), m.type_float(32), m.type_int(32, False)
    # Workgroup-scope matrix types need the workgroup size first: LocalSizeId constants declared before them.
    local_size = [m.constant(u32, n) for n in (128, 1, 1)] if scope == "Workgroup" else (32, 1, 1)
    half_pointer, src = _halves_buffer(m, 0, "src")
    _, dst = _halves_buffer(m, 1, "dst")
    a_type = m.type_cooperative_matrix_khr(f16, scope, M, K, "MatrixAKHR")
    b_type = m.type_cooperative_matrix_khr(f16, scope, K, N, "MatrixBKHR")
    acc_type = m.type_cooperative_matrix_khr(f16, scope, M, N, "MatrixAccumulatorKHR")
    acc32_type = m.type_cooperative_matrix_khr(f32, scope, M, N, "MatrixAccumulatorKHR")
    leaky = per_element_function(m, f16, [f16], name="leaky_relu")
    _, _, x, slope = leaky.params
    leaky.return_(leaky.ext_inst(f16, "FMax", x, leaky.emit("OpFMul", f16, x, slope)))
    add = combine_function(m, f16, name="add")
    add.return_(add.emit("OpFAdd", f16, *add.params))

    main = m.function(m.type_void(), name="main")
    base = main.emit("OpAccessChain", half_pointer, src, m.integer(0), m.integer(0))
    out = main.emit("OpAccessChain", half_pointer, dst, m.integer(0), m.integer(0))
    rows = TensorLayoutValue.create(main, m.type_tensor_layout_nv(2, "Constant"), name="rows")
    batch = rows.set_block_size(1, 1).set_dimension(100, K).set_stride(K, 1).slice((96, 0), (M, K))
    a = load_tensor(main, a_type, base, batch.set_clamp_value(0), name="a")
    weights = TensorLayoutValue.create(main, m.type_tensor_layout_nv(2)).set_dimension(N, K)
    transposing = TensorViewValue.create(main, m.type_tensor_view_nv(2, False, (1, 0)))
    b = load_tensor(main, b_type, base, weights, view=transposing, memory_access=("Aligned", 16), name="b")
    bias_layout = TensorLayoutValue.create(main, m.type_tensor_layout_nv(1, "ClampToEdge")).set_dimension(N)
    broadcast = TensorViewValue.create(main, m.type_tensor_view_nv(2, True)).set_dimension(M, N).set_stride(0, 1)
    bias = load_tensor(main, acc_type, base, bias_layout, view=broadcast.set_clip(0, M, 0, N), name="bias")
    y = main.emit("OpCooperativeMatrixMulAddKHR", acc_type, a, b, bias, name="y")
    y = main.emit("OpCooperativeMatrixPerElementOpNV", acc_type, y, leaky.id, m.constant(f16, 0.125), name="act")
    for mode, shape in REDUCTIONS.items():
        main.emit("OpCooperativeMatrixReduceNV", m.type_cooperative_matrix_khr(f16, scope, *shape,
                                                                                "MatrixAccumulatorKHR"),
                  y, mode, add.id)
    y32 = main.emit("OpCooperativeMatrixMulAddKHR", acc32_type, a, b, m.constant_null(acc32_type), name="y32")
    for source in (y, y32):
        convert(main, m.type_cooperative_matrix_khr(f16, scope, M, N, "MatrixAKHR"), source)
        main.emit("OpCooperativeMatrixTransposeNV", m.type_cooperative_matrix_khr(f16, scope, N, M, "MatrixBKHR"),
                  source)
    outputs = TensorLayoutValue.create(main, m.type_tensor_layout_nv(2, "Constant")).set_dimension(100, N)
    store_tensor(main, out, y, outputs.slice((96, 0), (M, N)))
    corner = TensorViewValue.create(main, m.type_tensor_view_nv(2, False)).set_clip(0, 4, 0, N)
    store_tensor(main, out, y, outputs, view=corner)
    main.return_()
    m.entry_point(main, "main", "GLCompute", local_size=local_size)
    return m


def _block_pointer(m: Module, members: list, offsets: list, stride: int, name: str):
    """(the block struct, a PhysicalStorageBuffer pointer to it, a storage buffer of blocks at binding 0)."""
    block = m.type_struct(members, offsets=offsets, name=name)
    blocks = m.type_struct([m.type_runtime_array(block, stride=stride)], offsets=[0], decorations=["Block"])
    weights = m.global_variable("StorageBuffer", blocks, name="weights",
                                decorations=["NonWritable", ("DescriptorSet", 0), ("Binding", 0)])
    return block, m.type_pointer("PhysicalStorageBuffer", block), weights


def _weight_tile(m: Module, main, block, weights, a_type, b_type, acc_type, decoders: dict) -> None:
    """acc = A * B with B (K x N) = W^T decoded from N x K block-quantized weights, blocks of 32 along K."""
    half_pointer, io = _halves_buffer(m, 1, "io")
    base = main.emit("OpAccessChain", half_pointer, io, m.integer(0), m.integer(0))
    layout = TensorLayoutValue.create(main, m.type_tensor_layout_nv(2)).set_block_size(1, BLOCK).set_dimension(N, K)
    first = main.emit("OpAccessChain", m.type_pointer("StorageBuffer", block), weights, m.integer(0), m.integer(0))
    transposing = TensorViewValue.create(main, m.type_tensor_view_nv(2, False, (1, 0)))
    b = load_tensor(main, b_type, first, layout, view=transposing, name="b", **decoders)
    a = load_tensor(main, a_type, base, TensorLayoutValue.create(main, m.type_tensor_layout_nv(2)).set_dimension(M, K))
    y = main.emit("OpCooperativeMatrixMulAddKHR", acc_type, a, b, m.constant_null(acc_type))
    store_tensor(main, base, y, TensorLayoutValue.create(main, m.type_tensor_layout_nv(2)).set_dimension(M, N))


def q8_0_decode_shader() -> Module:
    """B decoded from Q8_0 blocks: the DecodeFunc reads the block's scale and its int8 at coordInBlock[1]."""
    m = Module(addressing_model="PhysicalStorageBuffer64")
    f16, i8, i32 = m.type_float(16), m.type_int(8, True), m.type_int(32, True)
    block, pointer, weights = _block_pointer(m, [f16, m.type_array(i8, BLOCK, stride=1)], [0, 2], 34, "block_q8_0")
    decode = decode_function(m, f16, pointer, 2, name="decode_q8_0")
    at, _, coord_in_block = decode.params
    scale = decode.emit("OpLoad", f16, decode.emit("OpAccessChain", m.type_pointer("PhysicalStorageBuffer", f16), at,
                                                   m.integer(0)), "Aligned", 2, name="d")
    j = decode.emit("OpCompositeExtract", m.type_int(32, False), coord_in_block, 1)
    quant = decode.emit("OpLoad", i8, decode.emit("OpAccessChain", m.type_pointer("PhysicalStorageBuffer", i8), at,
                                                  m.constant(i32, 1), j), "Aligned", 1, name="q")
    decode.return_(decode.emit("OpFMul", f16, scale, decode.emit("OpConvertSToF", f16, quant)))

    main = m.function(m.type_void(), name="main")
    _weight_tile(m, main, block, weights, *_subgroup_types(m), {"decode": decode})
    main.return_()
    m.entry_point(main, "main", "GLCompute", local_size=(32, 1, 1))
    return m


def _subgroup_types(m: Module) -> tuple:
    f16 = m.type_float(16)
    return (m.type_cooperative_matrix_khr(f16, "Subgroup", M, K, "MatrixAKHR"),
            m.type_cooperative_matrix_khr(f16, "Subgroup", K, N, "MatrixBKHR"),
            m.type_cooperative_matrix_khr(f16, "Subgroup", M, N, "MatrixAccumulatorKHR"))


def q4_0_decode_shader(decode_vector: bool = True) -> Module:
    """B decoded from Q4_0 blocks (element j < 16 is the low nibble of byte j, j >= 16 the high nibble of byte
    j - 16; value (nibble - 8) * scale) by a scalar DecodeFunc and, with `decode_vector`, a DecodeVectorFunc that
    decodes 8 elements from 8 bytes."""
    m = Module(addressing_model="PhysicalStorageBuffer64")
    f16, u8, u32 = m.type_float(16), m.type_int(8, False), m.type_int(32, False)
    block, pointer, weights = _block_pointer(m, [f16, m.type_array(u8, 16, stride=1)], [0, 2], 18, "block_q4_0")

    def nibbles(fn, at, first, shift, count):
        """(nibble - 8) as f16 for bytes first .. first + count - 1 of the block, and the block's scale."""
        scale = fn.emit("OpLoad", f16, fn.emit("OpAccessChain", m.type_pointer("PhysicalStorageBuffer", f16), at,
                                               m.integer(0)), "Aligned", 2)
        values = []
        for i in range(count):
            byte = fn.emit("OpLoad", u8, fn.emit("OpAccessChain", m.type_pointer("PhysicalStorageBuffer", u8), at,
                                                 m.integer(1), fn.emit("OpIAdd", u32, first, m.integer(i))),
                           "Aligned", 1)
            nibble = fn.emit("OpBitwiseAnd", u32, fn.emit("OpShiftRightLogical", u32,
                                                          fn.emit("OpUConvert", u32, byte), shift), m.integer(15))
            values.append(fn.emit("OpFSub", f16, fn.emit("OpConvertUToF", f16, nibble), m.constant(f16, 8.0)))
        return scale, values

    def coordinates(fn):
        j = fn.emit("OpCompositeExtract", u32, fn.params[2], 1)
        shift = fn.emit("OpShiftLeftLogical", u32, fn.emit("OpShiftRightLogical", u32, j, m.integer(4)), m.integer(2))
        return fn.emit("OpBitwiseAnd", u32, j, m.integer(15)), shift

    decode = decode_function(m, f16, pointer, 2, name="decode_q4_0")
    scale, (value,) = nibbles(decode, decode.params[0], *coordinates(decode), 1)
    decode.return_(decode.emit("OpFMul", f16, value, scale))
    decoders = {"decode": decode}
    if decode_vector:
        eight = decode_function(m, f16, pointer, 2, components=8, name="decode_q4_0_x8")
        scale, values = nibbles(eight, eight.params[0], *coordinates(eight), 8)
        vector = eight.emit("OpCompositeConstruct", m.type_vector(f16, 8), *values)
        eight.return_(eight.emit("OpVectorTimesScalar", m.type_vector(f16, 8), vector, scale))
        decoders["decode_vector"] = eight

    main = m.function(m.type_void(), name="main")
    _weight_tile(m, main, block, weights, *_subgroup_types(m), decoders)
    main.return_()
    m.entry_point(main, "main", "GLCompute", local_size=(32, 1, 1))
    return m
