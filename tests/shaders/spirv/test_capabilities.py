"""Capabilities and extensions are inferred from the instructions, enumerants and types a module uses."""

from __future__ import annotations

import re

import pytest

from coopnn.shaders.spirv import Module, SpirvBuildError, disassemble, grammar
from coopnn.shaders.spirv.capabilities import choose_capabilities, choose_extensions
from coopnn.shaders.spirv.grammar import Availability


def declared(m: Module) -> tuple[list[str], list[str]]:
    text = disassemble(m.to_words())
    return re.findall(r"OpCapability (\w+)", text), re.findall(r'OpExtension "(\w+)"', text)


def with_main(m: Module, body=lambda m, fn: None) -> Module:
    main = m.function(m.type_void(), name="main")
    body(m, main)
    main.return_()
    m.entry_point(main, "main", "GLCompute", local_size=(1, 1, 1))
    return m


def test_a_plain_compute_shader_needs_shader_and_the_vulkan_memory_model():
    assert declared(with_main(Module())) == (["Shader", "VulkanMemoryModel"], [])


def test_glsl450_memory_model_option():
    assert declared(with_main(Module(memory_model="GLSL450"))) == (["Shader"], [])


@pytest.mark.parametrize("memory_model, scope, needed", [
    ("Vulkan", "Device", True), ("Vulkan", "Workgroup", False), ("GLSL450", "Device", False)])
def test_device_scope_under_the_vulkan_memory_model_adds_its_capability(memory_model, scope, needed):
    def body(m, fn):
        m.enum_constant("Scope", scope)

    assert ("VulkanMemoryModelDeviceScope" in declared(with_main(Module(memory_model=memory_model), body))[0]) == needed


def test_float16_type_adds_float16():
    m = with_main(Module())
    m.type_float(16)
    assert "Float16" in declared(m)[0]


def test_16_bit_storage_buffer_adds_storage_buffer_16_bit_access():
    m = with_main(Module())
    block = m.type_struct([m.type_runtime_array(m.type_float(16), stride=2)], offsets=[0], decorations=["Block"])
    m.global_variable("StorageBuffer", block, decorations=[("DescriptorSet", 0), ("Binding", 0)])
    capabilities, extensions = declared(m)
    assert {"Float16", "StorageBuffer16BitAccess"} <= set(capabilities)
    assert extensions == []  # SPV_KHR_16bit_storage is core since SPIR-V 1.3


def test_narrow_push_constants_and_8_bit_buffers():
    m = with_main(Module())
    m.global_variable("PushConstant", m.type_struct([m.type_int(16, False)], offsets=[0], decorations=["Block"]))
    m.type_pointer("StorageBuffer", m.type_int(8, True))
    assert {"Int16", "StoragePushConstant16", "Int8", "StorageBuffer8BitAccess"} <= set(declared(m)[0])


def test_cooperative_vector_type_adds_capability_and_extension():
    m = with_main(Module())
    m.type_cooperative_vector_nv(m.type_float(16), 16)
    capabilities, extensions = declared(m)
    assert "CooperativeVectorNV" in capabilities
    assert extensions == ["SPV_NV_cooperative_vector"]


def test_cooperative_vector_training_instructions_add_the_training_capability():
    def body(m, fn):
        f16, u32 = m.type_float(16), m.type_int(32, False)
        pointer = m.global_variable("StorageBuffer", m.type_struct([m.type_runtime_array(f16, stride=2)], offsets=[0],
                                                                    decorations=["Block"]))
        array = fn.emit("OpAccessChain", m.type_pointer("StorageBuffer", m.type_runtime_array(f16, stride=2)), pointer,
                        m.constant(u32, 0))
        v = fn.emit("OpCooperativeVectorLoadNV", m.type_cooperative_vector_nv(f16, 16), array, m.constant(u32, 0))
        fn.emit("OpCooperativeVectorReduceSumAccumulateNV", array, m.constant(u32, 0), v)

    capabilities, extensions = declared(with_main(Module(), body))
    assert {"CooperativeVectorNV", "CooperativeVectorTrainingNV"} <= set(capabilities)
    assert extensions == ["SPV_NV_cooperative_vector"]


def test_extensions_depend_on_the_spir_v_version():
    m = with_main(Module(version=(1, 3)))
    m.type_pointer("StorageBuffer", m.type_float(16))
    capabilities, extensions = declared(m)
    assert "VulkanMemoryModel" in capabilities and "StorageBuffer16BitAccess" in capabilities
    assert extensions == ["SPV_KHR_vulkan_memory_model"]
    old = with_main(Module(version=(1, 2), memory_model="GLSL450"))
    old.type_pointer("StorageBuffer", old.type_float(16))
    assert declared(old)[1] == ["SPV_KHR_16bit_storage", "SPV_KHR_storage_buffer_storage_class"]


def test_an_item_newer_than_the_module_version_without_an_extension_is_an_error():
    def body(m, fn):
        fn.emit("OpGroupNonUniformElect", m.type_bool(), m.enum_constant("Scope", "Subgroup"))

    with pytest.raises(SpirvBuildError, match=r"OpGroupNonUniformElect needs SPIR-V 1.3; the module targets 1.2"):
        with_main(Module(version=(1, 2), memory_model="GLSL450"), body).to_words()


def test_decode_vector_capability_comes_from_the_overlay_and_implies_block_loads():
    requirements = [Availability("DecodeFunc", ("CooperativeMatrixBlockLoadsNV",)),
                    Availability("DecodeVectorFunc", ("CooperativeMatrixDecodeVectorNV",))]
    capabilities = choose_capabilities(grammar(), requirements, ["Shader"])
    assert capabilities == ["Shader", "CooperativeMatrixDecodeVectorNV"]
    extensions = choose_extensions(grammar(), requirements, capabilities, [], (1, 6))
    assert extensions == ["SPV_NV_cooperative_matrix_decode_vector"]


def test_of_several_capabilities_shader_is_preferred_and_an_explicit_one_wins():
    either = [Availability("SpecId", ("Kernel", "Shader"))]
    assert choose_capabilities(grammar(), either, []) == ["Shader"]
    assert choose_capabilities(grammar(), either, ["Kernel"]) == ["Kernel"]
    ballot = [Availability("GroupOperation Reduce", ("Kernel", "GroupNonUniformArithmetic", "GroupNonUniformBallot"))]
    assert choose_capabilities(grammar(), ballot, []) == ["GroupNonUniformArithmetic"]
    assert choose_capabilities(grammar(), ballot, ["GroupNonUniformBallot"]) == ["GroupNonUniformBallot"]


def test_khr_extension_preferred_among_alternatives():
    requirement = [Availability("PhysicalStorageBuffer", (), ("SPV_EXT_physical_storage_buffer",
                                                             "SPV_KHR_physical_storage_buffer"), (1, 5))]
    assert choose_extensions(grammar(), requirement, [], [], (1, 4)) == ["SPV_KHR_physical_storage_buffer"]
    assert choose_extensions(grammar(), requirement, [], ["SPV_EXT_physical_storage_buffer"], (1, 4)) == [
        "SPV_EXT_physical_storage_buffer"]
    assert choose_extensions(grammar(), requirement, [], [], (1, 5)) == []


def test_explicit_capability_is_kept_even_when_implied():
    m = with_main(Module())
    m.capability("Matrix")
    assert declared(m)[0] == ["Matrix", "Shader", "VulkanMemoryModel"]
    with pytest.raises(SpirvBuildError, match="Capability has no enumerant 'Warp'"):
        m.capability("Warp")


def test_extended_instruction_capabilities_are_inferred():
    def body(m, fn):
        f32 = m.type_float(32)
        fn.ext_inst(f32, "InterpolateAtCentroid", m.global_variable("Private", f32))

    assert "InterpolationFunction" in declared(with_main(Module(), body))[0]


def test_tensor_load_with_a_decode_vector_function_declares_the_overlay_capability_and_extension():
    m = Module()
    f16, u32 = m.type_float(16), m.type_int(32, False)
    matrix = m.type_cooperative_matrix_khr(f16, "Subgroup", 16, 16, "MatrixAKHR")
    layout_type = m.type("OpTypeTensorLayoutNV", m.constant(u32, 2), m.enum_constant("TensorClampMode", "Undefined"))
    halves = m.type_struct([m.type_runtime_array(f16, stride=2)], offsets=[0], decorations=["Block"])
    data = m.global_variable("StorageBuffer", halves, decorations=[("DescriptorSet", 0), ("Binding", 0)])
    decode = m.function(f16, name="decode")
    decode.return_(m.constant(f16, 1.0))
    decode_vector = m.function(m.type_vector(f16, 4), name="decode_vector")
    decode_vector.return_(m.constant(m.type_vector(f16, 4), [1.0] * 4))

    def body(m, fn):
        layout = fn.emit("OpCreateTensorLayoutNV", layout_type)
        fn.emit("OpCooperativeMatrixLoadTensorNV", matrix, data, m.constant_null(matrix), layout, "None",
                ("DecodeVectorFunc", "DecodeFunc"), decode.id, decode_vector.id)

    capabilities, extensions = declared(with_main(m, body))
    assert "CooperativeMatrixDecodeVectorNV" in capabilities
    assert "CooperativeMatrixBlockLoadsNV" not in capabilities  # implied by CooperativeMatrixDecodeVectorNV
    assert {"CooperativeMatrixKHR", "CooperativeMatrixTensorAddressingNV", "TensorAddressingNV"} <= set(capabilities)
    assert extensions == ["SPV_KHR_cooperative_matrix", "SPV_NV_cooperative_matrix2",
                          "SPV_NV_cooperative_matrix_decode_vector", "SPV_NV_tensor_addressing"]
    assert "None DecodeFunc|DecodeVectorFunc %decode %decode_vector" in disassemble(m.to_words())
