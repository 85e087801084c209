"""Operands are checked against the grammar: count, kind, enumerant names and their parameters."""

from __future__ import annotations

import pytest

from coopnn.shaders.spirv import Id, SpirvBuildError, grammar
from coopnn.shaders.spirv.encode import encode_instruction
from coopnn.shaders.spirv.literals import NumberFormat


def encode(opname, *operands, number_format=lambda type_id: NumberFormat(False, 32)):
    return encode_instruction(grammar(), opname, operands, number_format)


def test_result_id_is_made_and_placed_where_the_grammar_puts_it():
    f32, a, b = Id("f32"), Id("a"), Id("b")
    add = encode("OpFAdd", f32, a, b)
    assert add.opcode == grammar().instruction("OpFAdd").opcode
    assert add.operands == (f32, add.result, a, b)
    assert add.result_type is f32
    assert encode("OpStore", a, b).result is None


def test_missing_operand_names_it_and_shows_the_signature():
    with pytest.raises(SpirvBuildError, match=r"OpFAdd: missing operand 'Operand 2' <IdRef>; signature: OpFAdd "):
        encode("OpFAdd", Id(), Id())


def test_extra_operands_are_rejected():
    with pytest.raises(SpirvBuildError, match=r"OpFAdd: 1 operand\(s\) too many"):
        encode("OpFAdd", Id(), Id(), Id(), Id())


def test_wrong_kind_is_rejected_with_what_was_expected():
    with pytest.raises(SpirvBuildError, match=r"operand 'Operand 1' <IdRef> must be an Id, got 3"):
        encode("OpFAdd", Id(), 3, Id())
    with pytest.raises(SpirvBuildError, match=r"'Width' <LiteralInteger> must be an int, got '32'"):
        encode("OpTypeInt", "32", 0)
    with pytest.raises(SpirvBuildError, match=r"must be a StorageClass enumerant name, got 12"):
        encode("OpTypePointer", 12, Id())


def test_unknown_enumerant_is_rejected():
    with pytest.raises(SpirvBuildError, match="StorageClass has no enumerant 'Heap'"):
        encode("OpTypePointer", "Heap", Id())


def test_optional_operands_may_be_left_out():
    pointer = Id()
    plain = encode("OpLoad", Id(), pointer)
    aligned = encode("OpLoad", Id(), pointer, "Aligned", 16)
    assert len(aligned.operands) == len(plain.operands) + 2
    assert aligned.operands[-2:] == (grammar().enumerant("MemoryAccess", "Aligned").value, 16)


def test_enumerant_parameters_follow_the_enumerant_and_are_checked():
    target = Id()
    stride = encode("OpDecorate", target, "ArrayStride", 16)
    assert stride.operands == (target, grammar().enumerant("Decoration", "ArrayStride").value, 16)
    with pytest.raises(SpirvBuildError, match="missing operand 'Array Stride' <LiteralInteger> of Decoration Array"):
        encode("OpDecorate", target, "ArrayStride")
    with pytest.raises(SpirvBuildError, match="must be a BuiltIn enumerant name"):
        encode("OpDecorate", target, "BuiltIn", 28)


def test_bit_enums_take_several_names_with_parameters_in_bit_order():
    scope = Id()
    access = encode("OpLoad", Id(), Id(), ("MakePointerVisible", "Aligned", "NonPrivatePointer"), 4, scope)
    names = ("Aligned", "MakePointerVisible", "NonPrivatePointer")
    masks = [grammar().enumerant("MemoryAccess", n).value for n in names]
    assert access.operands[-3:] == (sum(masks), 4, scope)
    assert [r.what for r in access.requirements] == [
        "OpLoad", "MemoryAccess Aligned", "MemoryAccess MakePointerVisible", "MemoryAccess NonPrivatePointer"]


def test_variable_operand_lists_and_pairs():
    a, b, parent_a, parent_b = Id(), Id(), Id(), Id()
    phi = encode("OpPhi", Id(), (a, parent_a), (b, parent_b))
    assert phi.operands[2:] == (a, parent_a, b, parent_b)
    with pytest.raises(SpirvBuildError, match=r"must hold 2 values \(IdRef, IdRef\)"):
        encode("OpPhi", Id(), (a,))
    assert len(encode("OpTypeStruct").operands) == 1


def test_context_dependent_numbers_use_the_result_type_format():
    f16 = Id()
    half = encode("OpConstant", f16, 1.0, number_format=lambda t: NumberFormat(True, 16))
    assert half.operands[2:] == (0x3C00,)
    wide = encode("OpConstant", Id(), 1 << 40, number_format=lambda t: NumberFormat(False, 64))
    assert wide.operands[2:] == (0, 1 << 8)
    with pytest.raises(SpirvBuildError, match="OpConstant: operand 'Value'.*70000.0 does not fit in float16"):
        encode("OpConstant", f16, 70000.0, number_format=lambda t: NumberFormat(True, 16))


def test_spec_constant_op_takes_an_opname_then_that_instructions_operands():
    op = encode("OpSpecConstantOp", Id(), "OpIAdd", Id(), Id())
    assert op.operands[2] == grammar().instruction("OpIAdd").opcode
    assert len(op.operands) == 5
    with pytest.raises(SpirvBuildError, match="missing operand 'Operand 2' <IdRef> of OpIAdd"):
        encode("OpSpecConstantOp", Id(), "OpIAdd", Id())


def test_strings_take_whole_words():
    name = encode("OpName", Id(), "main")
    assert len(name.operands) == 3
