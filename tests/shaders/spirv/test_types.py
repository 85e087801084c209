"""Types are deduplicated when created; aggregates stay distinct when their decorations or names differ."""

from __future__ import annotations

import pytest

from coopnn.shaders.spirv import Module, SpirvBuildError


def test_same_type_twice_is_the_same_id_and_one_instruction():
    m = Module()
    assert m.type_float(32) is m.type_float(32)
    assert m.type_vector(m.type_float(32), 4) is m.type_vector(m.type_float(32), 4)
    assert m.type_int(32, False) is not m.type_int(32, True)
    assert m.type_pointer("StorageBuffer", m.type_float(32)) is m.type("OpTypePointer", "StorageBuffer",
                                                                       m.type_float(32))
    assert sum(i.opname == "OpTypeFloat" for i in m.globals) == 1


def test_arrays_with_other_strides_are_other_types():
    m = Module()
    f32 = m.type_float(32)
    assert m.type_runtime_array(f32, stride=4) is m.type_runtime_array(f32, stride=4)
    assert m.type_runtime_array(f32, stride=4) is not m.type_runtime_array(f32, stride=8)
    strides = [i.operands[-1] for i in m.annotations if i.opname == "OpDecorate"]
    assert strides == [4, 8]


def test_structs_differing_only_in_member_offsets_or_names_are_distinct():
    m = Module()
    f32 = m.type_float(32)
    packed = m.type_struct([f32, f32], offsets=[0, 4], decorations=["Block"])
    assert m.type_struct([f32, f32], offsets=[0, 4], decorations=["Block"]) is packed
    assert m.type_struct([f32, f32], offsets=[0, 16], decorations=["Block"]) is not packed
    assert m.type_struct([f32, f32], offsets=[0, 4], decorations=["Block"], name="Other") is not packed
    member_decorations = [i for i in m.annotations if i.opname == "OpMemberDecorate"]
    assert len(member_decorations) == 6


def test_array_length_and_coopvec_count_become_uint_constants():
    m = Module()
    u32 = m.type_int(32, False)
    array = m.type_array(m.type_float(32), 8)
    assert m.type_info(array).operands[1] is m.constant(u32, 8)
    vector = m.type_cooperative_vector_nv(m.type_float(16), 16)
    assert m.constant_value(m.type_info(vector).operands[1]) == 16


def test_cooperative_matrix_takes_scope_and_use_by_name():
    m = Module()
    matrix = m.type_cooperative_matrix_khr(m.type_float(16), "Subgroup", 16, 16, "MatrixAccumulatorKHR")
    scope, use = m.type_info(matrix).operands[1], m.type_info(matrix).operands[4]
    assert m.constant_value(scope) == m.grammar.enumerant("Scope", "Subgroup").value
    assert m.constant_value(use) == 2


def test_type_rejects_instructions_that_are_not_types():
    with pytest.raises(SpirvBuildError, match="OpFAdd does not declare a type"):
        Module().type("OpFAdd")


def test_scalar_widths_look_through_aggregates_not_pointers():
    m = Module()
    f16, u8 = m.type_float(16), m.type_int(8, False)
    pointer = m.type_pointer("Function", m.type_float(64))
    struct = m.type_struct([m.type_runtime_array(f16), m.type_vector(u8, 4), pointer])
    assert m.scalar_widths(struct) == {8, 16}
