"""Complete modules from the builder pass spirv-val; decorations and execution modes pick their opcodes."""

from __future__ import annotations

import pytest

from coopnn.shaders.spirv import Module, SpirvBuildError, disassemble
from tests.shaders.spirv.sample_modules import coopvec_layer_shader, exp_sum_shader


def assert_valid(spirv_tool, module: Module, target_env: str = "vulkan1.3", *options: str) -> None:
    result = spirv_tool("spirv-val", "--target-env", target_env, *options, "-", input=module.to_bytes())
    assert result.returncode == 0, result.stderr.decode() + "\n" + disassemble(module.to_words())


def test_compute_shader_with_buffers_push_constant_bounds_check_loop_and_exp_is_valid(spirv_tool):
    assert_valid(spirv_tool, exp_sum_shader())


def test_the_same_shader_at_spir_v_1_3_with_extensions_is_valid_for_vulkan_1_1(spirv_tool):
    assert_valid(spirv_tool, exp_sum_shader(version=(1, 3)), "vulkan1.1")


def test_cooperative_vector_matrix_mul_add_with_inferencing_optimal_layout_is_valid(spirv_tool):
    text = disassemble(coopvec_layer_shader().to_words())
    assert "OpCooperativeVectorMatrixMulAddNV" in text
    assert_valid(spirv_tool, coopvec_layer_shader())


def test_float16_math_from_a_16_bit_storage_buffer_is_valid(spirv_tool):
    m = Module()
    f16, u32 = m.type_float(16), m.type_int(32, False)
    halves = m.type_struct([m.type_runtime_array(f16, stride=2)], offsets=[0], decorations=["Block"])
    data = m.global_variable("StorageBuffer", halves, decorations=[("DescriptorSet", 0), ("Binding", 0)])
    main = m.function(m.type_void(), name="main")
    pointer = main.emit("OpAccessChain", m.type_pointer("StorageBuffer", f16), data, m.constant(u32, 0),
                        m.constant(u32, 0))
    value = main.emit("OpLoad", f16, pointer)
    main.emit("OpStore", pointer, main.ext_inst(f16, "Exp", main.emit("OpFMul", f16, value, m.constant(f16, 0.5))))
    main.return_()
    m.entry_point(main, local_size=(1, 1, 1))
    assert_valid(spirv_tool, m)


def test_local_size_from_spec_constants_uses_execution_mode_id(spirv_tool):
    m = Module()
    u32 = m.type_int(32, False)
    size = [m.spec_constant(u32, n, spec_id) for spec_id, n in enumerate((64, 1, 1))]
    main = m.function(m.type_void(), name="main")
    main.return_()
    m.entry_point(main, local_size=size)
    assert m.execution_modes[0].opname == "OpExecutionModeId"
    assert_valid(spirv_tool, m, "vulkan1.3", "--allow-localsizeid")


def test_decorations_pick_their_opcode_and_repeats_are_dropped():
    m = Module()
    f32 = m.type_float(32)
    variable = m.global_variable("Private", f32)
    m.decorate(variable, "UserSemantic", "weights")
    m.decorate(variable, "RelaxedPrecision")
    m.decorate(variable, "RelaxedPrecision")
    m.decorate(variable, "AlignmentId", m.constant(m.type_int(32, False), 16))
    assert [i.opname for i in m.annotations] == ["OpDecorateString", "OpDecorate", "OpDecorateId"]


def test_execution_modes_with_literals_use_execution_mode():
    m = Module()
    main = m.function(m.type_void(), name="main")
    main.return_()
    m.entry_point(main, local_size=(8, 8, 1))
    assert [i.opname for i in m.execution_modes] == ["OpExecutionMode"]
    assert "OpExecutionMode %main LocalSize 8 8 1" in disassemble(m.to_words())


def test_unknown_execution_model_is_rejected():
    m = Module()
    main = m.function(m.type_void(), name="main")
    main.return_()
    with pytest.raises(SpirvBuildError, match="ExecutionModel has no enumerant 'Compute'"):
        m.entry_point(main, model="Compute")
