"""SPV_NV_cooperative_matrix2, SPV_NV_tensor_addressing and SPV_NV_cooperative_matrix_decode_vector through the
builder: complete modules pass spirv-val (their disassembly is checked against golden files and spirv-dis in
test_disasm.py), the helpers check what spirv-val cannot, and the DecodeVectorFunc module, which the SPIRV-Tools
here do not know, is checked word by word."""

from __future__ import annotations

import re

import pytest

from coopnn.shaders.spirv import Function, Id, Module, SpirvBuildError, disassemble, grammar
from coopnn.shaders.spirv.cooperative_matrix2 import (
    TensorLayoutValue, TensorViewValue, convert, decode_function, load_tensor)
from coopnn.shaders.spirv.literals import string_from_words
from tests.shaders.spirv.coopmat2_modules import q4_0_decode_shader, q8_0_decode_shader, tensor_addressing_shader
from tests.shaders.spirv.test_builder import assert_valid

OPCODES_USED = [
    "OpTypeTensorLayoutNV", "OpTypeTensorViewNV", "OpCreateTensorLayoutNV", "OpTensorLayoutSetDimensionNV",
    "OpTensorLayoutSetStrideNV", "OpTensorLayoutSliceNV", "OpTensorLayoutSetBlockSizeNV",
    "OpTensorLayoutSetClampValueNV", "OpCreateTensorViewNV", "OpTensorViewSetDimensionNV", "OpTensorViewSetStrideNV",
    "OpTensorViewSetClipNV", "OpCooperativeMatrixLoadTensorNV", "OpCooperativeMatrixStoreTensorNV",
    "OpCooperativeMatrixPerElementOpNV", "OpCooperativeMatrixReduceNV", "OpCooperativeMatrixConvertNV",
    "OpCooperativeMatrixTransposeNV",
]


def instructions(words: list[int]):
    """(opname, operand words) of each instruction after the header."""
    position = 5
    while position < len(words):
        count, opcode = words[position] >> 16, words[position] & 0xFFFF
        yield grammar().instruction_by_opcode(opcode).opname, words[position + 1:position + count]
        position += count


def result_position(opname: str) -> int:
    return [operand.kind for operand in grammar().instruction(opname).operands].index("IdResult")


def declared(text: str) -> tuple[list[str], list[str]]:
    return re.findall(r"OpCapability (\w+)", text), re.findall(r'OpExtension "(\w+)"', text)


@pytest.mark.parametrize("scope", ["Subgroup", "Workgroup"])
def test_a_layer_on_tensor_addressed_matrices_is_valid_at_either_scope(spirv_tool, scope):
    module = tensor_addressing_shader(scope)
    assert_valid(spirv_tool, module, "vulkan1.3", *(["--allow-localsizeid"] if scope == "Workgroup" else []))
    text = disassemble(module.to_words())
    assert {opname for opname, _ in instructions(module.to_words())} >= set(OPCODES_USED)
    capabilities, extensions = declared(text)
    assert {"CooperativeMatrixReductionsNV", "CooperativeMatrixConversionsNV",
            "CooperativeMatrixPerElementOperationsNV", "CooperativeMatrixTensorAddressingNV",
            "TensorAddressingNV"} <= set(capabilities)
    assert extensions == ["SPV_KHR_cooperative_matrix", "SPV_NV_cooperative_matrix2", "SPV_NV_tensor_addressing"]
    scope_value = grammar().enumerant("Scope", scope).value
    assert f"OpTypeCooperativeMatrixKHR %half %uint_{scope_value} %uint_16 %uint_32 %uint_0\n" in text


def test_workgroup_matrices_need_the_local_size_ids_declared_first(spirv_tool):
    """SPV_NV_cooperative_matrix2: "If an OpTypeCooperativeMatrixKHR instruction uses a Scope of Workgroup, then the
    workgroup size must have already been specified in the module, including any constant instructions used by
    LocalSizeId." """
    m = Module()
    u32 = m.type_int(32, False)
    m.type_cooperative_matrix_khr(m.type_float(16), "Workgroup", 64, 48, "MatrixAccumulatorKHR")
    main = m.function(m.type_void(), name="main")
    main.return_()
    m.entry_point(main, local_size=[m.constant(u32, n) for n in (256, 1, 1)])
    result = spirv_tool("spirv-val", "--target-env", "vulkan1.3", "--allow-localsizeid", "-", input=m.to_bytes())
    assert result.returncode != 0 and "used before LocalSizeId constant" in result.stderr.decode()


def test_a_q8_0_decode_function_receives_the_block_and_the_coordinates_in_it(spirv_tool):
    module = q8_0_decode_shader()
    assert_valid(spirv_tool, module)
    text = disassemble(module.to_words())
    assert "OpTypeFunction %half %_ptr_PhysicalStorageBuffer_block_q8_0 %_arr_uint_uint_2 %_arr_uint_uint_2" in text
    assert re.search(r"OpCooperativeMatrixLoadTensorNV %\w+ %\w+ %\w+ %\w+ None TensorView\|DecodeFunc %\w+ "
                     r"%decode_q8_0\n", text)
    capabilities, _ = declared(text)
    assert {"CooperativeMatrixBlockLoadsNV", "PhysicalStorageBufferAddresses"} <= set(capabilities)


def test_the_q4_0_module_without_its_decode_vector_function_is_valid(spirv_tool):
    assert_valid(spirv_tool, q4_0_decode_shader(decode_vector=False))


def test_the_decode_vector_load_names_both_functions_after_the_view(spirv_tool):
    """SPV_NV_cooperative_matrix_decode_vector is newer than SPIRV-Tools 2025.5: its spirv-val stops at the
    capability (5447). The module is the valid one above plus the DecodeVectorFunc, checked word by word: the
    capability and extension, the operand mask TensorView|DecodeFunc|DecodeVectorFunc followed by the view and the
    two functions in bit order, and a vector function of 8 float16 with DecodeFunc's parameters."""
    module = q4_0_decode_shader()
    words = module.to_words()
    result = spirv_tool("spirv-val", "--target-env", "vulkan1.3", "-", input=module.to_bytes())
    assert result.returncode == 0 or "Invalid capability operand: 5447" in result.stderr.decode()
    listed = list(instructions(words))
    names = {string_from_words(operands[1:])[0]: operands[0] for opname, operands in listed if opname == "OpName"}
    by_result = {operands[result_position(opname)]: (opname, operands) for opname, operands in listed
                 if grammar().instruction(opname).has_result}
    capabilities = [operands[0] for opname, operands in listed if opname == "OpCapability"]
    capability = grammar().enumerant("Capability", "CooperativeMatrixDecodeVectorNV").value
    assert capability in capabilities
    assert grammar().enumerant("Capability", "CooperativeMatrixBlockLoadsNV").value not in capabilities  # implied
    extensions = [string_from_words(operands)[0] for opname, operands in listed if opname == "OpExtension"]
    assert "SPV_NV_cooperative_matrix_decode_vector" in extensions

    (load,) = [operands for opname, operands in listed if opname == "OpCooperativeMatrixLoadTensorNV"
               and operands[6]]  # the other load (of A) has no addressing operands
    bits = {name: grammar().enumerant("TensorAddressingOperands", name).value
            for name in ("TensorView", "DecodeFunc", "DecodeVectorFunc")}
    assert load[5] == 0 and load[6] == sum(bits.values())  # Memory Operand None, then the addressing mask
    assert by_result[load[7]][0] == "OpCreateTensorViewNV"
    assert load[8:] == [names["decode_q4_0"], names["decode_q4_0_x8"]]

    functions = {operands[1]: operands[3] for opname, operands in listed if opname == "OpFunction"}
    scalar_type = [o for n, o in listed if n == "OpTypeFunction" and o[0] == functions[names["decode_q4_0"]]][0]
    vector_type = [o for n, o in listed if n == "OpTypeFunction" and o[0] == functions[names["decode_q4_0_x8"]]][0]
    assert vector_type[2:] == scalar_type[2:]  # pointer, blockCoord, coordInBlock
    returned = by_result[vector_type[1]]
    assert returned[0] == "OpTypeVector" and returned[1][1:] == [scalar_type[1], 8]
    assert "TensorView|DecodeFunc|DecodeVectorFunc %" in disassemble(words)


def layer_module() -> tuple[Module, Function, Id]:
    """A module, its open main function and float16."""
    m = Module()
    main = m.function(m.type_void(), name="main")
    return m, main, m.type_float(16)


def test_layout_and_view_operations_take_one_value_per_dimension():
    m, main, _ = layer_module()
    layout = TensorLayoutValue.create(main, m.type_tensor_layout_nv(3))
    assert layout.dim == 3
    with pytest.raises(SpirvBuildError, match="OpTensorLayoutSetDimensionNV takes 3 value\\(s\\).*got 2"):
        layout.set_dimension(4, 4)
    with pytest.raises(SpirvBuildError, match="OpTensorLayoutSliceNV takes 6 value"):
        layout.slice((0, 0), (1, 1))
    view = TensorViewValue.create(main, m.type_tensor_view_nv(2, True))
    with pytest.raises(SpirvBuildError, match="OpTensorViewSetStrideNV takes 2"):
        view.set_stride(1)
    with pytest.raises(SpirvBuildError, match="is OpTypeTensorViewNV, not OpTypeTensorLayoutNV"):
        TensorLayoutValue.create(main, m.type_tensor_view_nv(2, True))
    with pytest.raises(SpirvBuildError, match="must permute 0..1"):
        m.type_tensor_view_nv(2, False, (0, 0))


def test_negative_slice_offsets_become_signed_constants():
    """SPV_NV_tensor_addressing: "The Offset and Span operands must each be a scalar 32-bit integer type"; offsets
    are int32 in the layout's state, so a slice can start before the tensor (clamped by the clamp mode)."""
    m, main, _ = layer_module()
    layout = TensorLayoutValue.create(main, m.type_tensor_layout_nv(2, "ClampToEdge")).set_dimension(8, 8)
    layout.slice((-2, 0), (4, 8))
    main.return_()
    m.entry_point(main, local_size=(1, 1, 1))
    assert re.search(r"OpTensorLayoutSliceNV %\w+ %\w+ %int_n2 %uint_4 %uint_0 %uint_8\n", disassemble(m.to_words()))
    assert m.integer(-2) != m.integer(2) and m.integer(m.integer(3)) is m.integer(3)


def test_a_decode_vector_function_needs_the_scalar_one_and_a_vector_of_the_components():
    """SPV_NV_cooperative_matrix_decode_vector: "DecodeFunc must also be present in the same Tensor Addressing
    Operands." and "The Result Type of DecodeVectorFuncs function must be a vector of the 'Component Type of Result
    Type with 2, 4, or 8 components." """
    m = Module(addressing_model="PhysicalStorageBuffer64")
    f16, f32 = m.type_float(16), m.type_float(32)
    pointer = m.type_pointer("PhysicalStorageBuffer", f16)
    matrix = m.type_cooperative_matrix_khr(f16, "Subgroup", 16, 16, "MatrixBKHR")
    scalar = decode_function(m, f16, pointer, 2, name="decode")
    wrong = decode_function(m, f32, pointer, 2, components=4, name="decode_f32_x4")
    main = m.function(m.type_void(), name="main")
    layout = TensorLayoutValue.create(main, m.type_tensor_layout_nv(2)).set_block_size(1, 8).set_dimension(16, 16)
    data = m.constant_null(m.type_pointer("PhysicalStorageBuffer", f16))
    with pytest.raises(SpirvBuildError, match="DecodeVectorFunc needs DecodeFunc"):
        load_tensor(main, matrix, data, layout, decode_vector=decode_function(m, f16, pointer, 2, components=8))
    with pytest.raises(SpirvBuildError, match="returns a vector of 2/4/8 of the matrix's component type"):
        load_tensor(main, matrix, data, layout, decode=scalar, decode_vector=wrong)
    with pytest.raises(SpirvBuildError, match="returns 1, 2, 4 or 8 components; got 3"):
        decode_function(m, f16, pointer, 2, components=3)
    with pytest.raises(SpirvBuildError, match="PhysicalStorageBuffer memory; got StorageBuffer"):
        decode_function(m, f16, m.type_pointer("StorageBuffer", f16), 2)


def test_convert_picks_the_instruction_the_specification_resolves_on(spirv_tool):
    """SPV_NV_cooperative_matrix2, issue "How are matrix type conversions with Use change handled?": "Conversions
    that change the Component Type should use Op{F,S,U,etc.}Convert even if the Use changes." and "conversions that
    only change the Use ... we add a new OpCooperativeMatrixConvertNV instruction for this case." """
    m, main, f16 = layer_module()
    f32, i8, i32, u8 = m.type_float(32), m.type_int(8, True), m.type_int(32, True), m.type_int(8, False)

    def matrix(component, use):
        return m.type_cooperative_matrix_khr(component, "Subgroup", 16, 16, use)

    f32_acc, i32_acc = (m.constant_null(matrix(c, "MatrixAccumulatorKHR")) for c in (f32, i32))
    made = [convert(main, matrix(f16, "MatrixAKHR"), f32_acc), convert(main, matrix(f32, "MatrixBKHR"), f32_acc),
            convert(main, matrix(i8, "MatrixAKHR"), i32_acc), convert(main, matrix(f16, "MatrixBKHR"), i32_acc),
            convert(main, matrix(f32, "MatrixAccumulatorKHR"), i32_acc)]
    assert convert(main, matrix(f32, "MatrixAccumulatorKHR"), f32_acc) is f32_acc
    with pytest.raises(SpirvBuildError, match="signedness alone is OpBitcast"):
        convert(main, matrix(u8, "MatrixAKHR"), convert(main, matrix(i8, "MatrixAccumulatorKHR"), i32_acc))
    main.return_()
    m.entry_point(main, local_size=(32, 1, 1))
    assert [i.opname for i in main.blocks[0].instructions if i.result in made] == [
        "OpFConvert", "OpCooperativeMatrixConvertNV", "OpSConvert", "OpConvertSToF", "OpConvertSToF"]
    assert "CooperativeMatrixConversionsNV" in declared(disassemble(m.to_words()))[0]
    assert_valid(spirv_tool, m)
