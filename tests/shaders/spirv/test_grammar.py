"""Typed grammar lookups: opcodes, signatures, enumerants, aliases, implied capabilities, GLSL.std.450."""

from __future__ import annotations

import pytest

from coopnn.shaders.spirv import SpirvBuildError, grammar


def test_instruction_lookup_by_name_alias_and_opcode():
    table = grammar()
    mul_add = table.instruction("OpCooperativeVectorMatrixMulAddNV")
    assert mul_add.opcode == 5292
    assert mul_add.availability.capabilities == ("CooperativeVectorNV",)
    assert table.instruction_by_opcode(5292) is mul_add
    assert table.instruction("OpSDotKHR") is table.instruction("OpSDot")
    assert [(o.kind, o.quantifier) for o in table.instruction("OpLoad").operands] == [
        ("IdResultType", ""), ("IdResult", ""), ("IdRef", ""), ("MemoryAccess", "?")]


def test_signature_names_operands_without_the_result_id():
    signature = grammar().instruction("OpFAdd").signature
    assert signature == "OpFAdd <IdResultType>, 'Operand 1' <IdRef>, 'Operand 2' <IdRef>"


def test_enumerants_by_name_alias_and_value():
    table = grammar()
    assert table.enumerant("CooperativeVectorMatrixLayout", "InferencingOptimalNV").value == 2
    assert table.enumerant("Capability", "StorageUniformBufferBlock16").name == "StorageBuffer16BitAccess"
    assert table.operand_kind("StorageClass").by_value(12).name == "StorageBuffer"
    assert table.enumerant("StorageClass", "StorageBuffer").availability.version == (1, 3)


def test_unknown_names_raise_a_build_error_naming_them():
    with pytest.raises(SpirvBuildError, match="unknown SPIR-V instruction 'OpFrobnicate'"):
        grammar().instruction("OpFrobnicate")
    with pytest.raises(SpirvBuildError, match="StorageClass has no enumerant 'Heap'"):
        grammar().enumerant("StorageClass", "Heap")


def test_implied_capabilities_follow_the_overlay():
    implied = grammar().implied_capabilities("CooperativeMatrixDecodeVectorNV")
    assert implied == {"CooperativeMatrixDecodeVectorNV", "CooperativeMatrixBlockLoadsNV"}
    assert "Matrix" in grammar().implied_capabilities("Shader")


def test_glsl_std_450_numbers():
    assert grammar().ext_inst("GLSL.std.450", "Exp").opcode == 27
    assert grammar().ext_inst_by_opcode("GLSL.std.450", 27).opname == "Exp"
