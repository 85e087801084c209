"""Two small but complete compute shaders built with the SPIR-V builder, shared by the validation and golden tests."""

from __future__ import annotations

from coopnn.shaders.spirv import Module


def exp_sum_shader(version: tuple[int, int] = (1, 6)) -> Module:
    """out[i] = 4 * exp(in[i]) for i < count: storage buffers, a push constant, GlobalInvocationId, a bounds check,
    a counted loop with a function-local accumulator, and GLSL.std.450 Exp."""
    m = Module(version=version)
    f32, u32, boolean = m.type_float(32), m.type_int(32, False), m.type_bool()
    floats = m.type_runtime_array(f32, stride=4)
    buffer = m.type_struct([floats], offsets=[0], decorations=["Block"], name="Floats", member_names=["data"])
    src = m.global_variable("StorageBuffer", buffer, name="src", decorations=[("DescriptorSet", 0), ("Binding", 0)])
    dst = m.global_variable("StorageBuffer", buffer, name="dst", decorations=[("DescriptorSet", 0), ("Binding", 1)])
    push = m.global_variable("PushConstant", m.type_struct([u32], offsets=[0], decorations=["Block"], name="Push"),
                             name="push")
    uvec3 = m.type_vector(u32, 3)
    invocation = m.builtin_input("GlobalInvocationId", uvec3)

    main = m.function(m.type_void(), name="main")
    zero = m.constant(u32, 0)
    index = main.emit("OpCompositeExtract", u32, main.emit("OpLoad", uvec3, invocation), 0, name="index")
    count = main.emit("OpLoad", u32, main.emit("OpAccessChain", m.type_pointer("PushConstant", u32), push, zero))
    with main.if_(main.emit("OpUGreaterThanEqual", boolean, index, count)):
        main.return_()
    x = main.emit("OpLoad", f32, main.emit("OpAccessChain", m.type_pointer("StorageBuffer", f32), src, zero, index),
                  name="x")
    total = main.variable(f32, name="total", initializer=m.constant(f32, 0.0))
    with main.for_range(zero, m.constant(u32, 4)):
        partial = main.emit("OpLoad", f32, total)
        main.emit("OpStore", total, main.emit("OpFAdd", f32, partial, main.ext_inst(f32, "Exp", x)))
    out = main.emit("OpAccessChain", m.type_pointer("StorageBuffer", f32), dst, zero, index)
    main.emit("OpStore", out, main.emit("OpLoad", f32, total))
    main.return_()
    m.entry_point(main, "main", "GLCompute", local_size=(64, 1, 1))
    return m


def coopvec_layer_shader() -> Module:
    """One f16 linear layer through cooperative vectors: y = W x + b with W in the InferencingOptimal layout."""
    m = Module()
    f16, u32, boolean = m.type_float(16), m.type_int(32, False), m.type_bool()
    halves = m.type_runtime_array(f16, stride=2)
    buffer = m.type_struct([halves], offsets=[0], decorations=["Block"], name="Halves")
    weights = m.global_variable("StorageBuffer", buffer, name="weights",
                                decorations=["NonWritable", ("DescriptorSet", 0), ("Binding", 0)])
    io = m.global_variable("StorageBuffer", buffer, name="io", decorations=[("DescriptorSet", 0), ("Binding", 1)])
    inputs, outputs = m.type_cooperative_vector_nv(f16, 16), m.type_cooperative_vector_nv(f16, 32)

    main = m.function(m.type_void(), name="main")
    zero = m.constant(u32, 0)
    halves_pointer = m.type_pointer("StorageBuffer", halves)
    io_data = main.emit("OpAccessChain", halves_pointer, io, zero)
    matrix = main.emit("OpAccessChain", halves_pointer, weights, zero)
    x = main.emit("OpCooperativeVectorLoadNV", inputs, io_data, zero, name="x")
    float16 = m.enum_constant("ComponentType", "Float16NV")
    y = main.emit(
        "OpCooperativeVectorMatrixMulAddNV", outputs,
        x, float16,                                     # input, input interpretation
        matrix, zero, float16,                          # matrix, offset, interpretation
        matrix, m.constant(u32, 1024), float16,         # bias, offset, interpretation
        m.constant(u32, 32), m.constant(u32, 16),       # M, K
        m.enum_constant("CooperativeVectorMatrixLayout", "InferencingOptimalNV"),
        m.constant(boolean, False),                     # transpose
        name="y",
    )
    main.emit("OpCooperativeVectorStoreNV", io_data, m.constant(u32, 64), y)
    main.return_()
    m.entry_point(main, "main", "GLCompute", local_size=(32, 1, 1))
    return m
