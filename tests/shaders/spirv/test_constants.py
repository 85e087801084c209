"""Constants are deduplicated by type and encoded value; composites, nulls, enum values and spec constants."""

from __future__ import annotations

import pytest

from coopnn.shaders.spirv import Module, SpirvBuildError


def test_scalar_constants_are_deduplicated_by_type_and_bits():
    m = Module()
    f32, u32, i32 = m.type_float(32), m.type_int(32, False), m.type_int(32, True)
    assert m.constant(f32, 1.0) is m.constant(f32, 1) is m.constant(f32, 1.0)
    assert m.constant(u32, 1) is not m.constant(i32, 1)
    assert m.constant(f32, 0.0) is not m.constant(f32, -0.0)
    assert sum(i.opname == "OpConstant" for i in m.globals) == 5


def test_float16_constant_words():
    m = Module()
    one = m.constant(m.type_float(16), 1.0)
    (instruction,) = [i for i in m.globals if i.result is one]
    assert instruction.operands[2:] == (0x3C00,)


def test_64_bit_constant_takes_two_words():
    m = Module()
    big = m.constant(m.type_int(64, False), 1 << 40)
    (instruction,) = [i for i in m.globals if i.result is big]
    assert instruction.operands[2:] == (0, 1 << 8)


def test_booleans():
    m = Module()
    boolean = m.type_bool()
    assert m.constant(boolean, True) is m.constant(boolean, True)
    assert m.constant(boolean, True) is not m.constant(boolean, False)
    with pytest.raises(SpirvBuildError, match="needs True or False"):
        m.constant(boolean, 1)


def test_composites_from_python_values_share_their_constituents():
    m = Module()
    f32 = m.type_float(32)
    v4 = m.type_vector(f32, 4)
    a = m.constant(v4, [1.0, 2.0, 1.0, 2.0])
    assert m.constant(v4, [1.0, 2.0, 1.0, 2.0]) is a
    (instruction,) = [i for i in m.globals if i.result is a]
    assert instruction.opname == "OpConstantComposite"
    assert instruction.operands[2:] == (m.constant(f32, 1.0), m.constant(f32, 2.0)) * 2
    coopvec = m.type_cooperative_vector_nv(f32, 2)
    assert m.constant(coopvec, [m.constant(f32, 1.0), 2.0]) is m.constant_composite(coopvec, [m.constant(f32, 1.0),
                                                                                             m.constant(f32, 2.0)])
    with pytest.raises(SpirvBuildError, match="needs a sequence of 4 values"):
        m.constant(v4, [1.0])


def test_struct_and_array_constants():
    m = Module()
    f32, u32 = m.type_float(32), m.type_int(32, False)
    pair = m.type_struct([f32, u32])
    assert m.constant(pair, [0.5, 3]) is m.constant(pair, (0.5, 3))
    assert m.constant(m.type_array(u32, 3), [1, 2, 3]) is not None


def test_null_undef_and_enum_constants():
    m = Module()
    f32, u32 = m.type_float(32), m.type_int(32, False)
    assert m.constant_null(f32) is m.constant_null(f32)
    assert m.undef(f32) is m.undef(f32)
    layout = m.enum_constant("CooperativeVectorMatrixLayout", "InferencingOptimalNV")
    assert layout is m.constant(u32, 2)
    semantics = m.enum_constant("MemorySemantics", "AcquireRelease", "UniformMemory")
    assert m.constant_value(semantics) == 0x8 | 0x40
    with pytest.raises(SpirvBuildError, match="give exactly one name"):
        m.enum_constant("Scope", "Device", "Subgroup")


def test_spec_constants_are_never_shared_and_get_their_spec_id():
    m = Module()
    u32 = m.type_int(32, False)
    first, second = m.spec_constant(u32, 64, 0), m.spec_constant(u32, 64, 1)
    assert first is not second
    spec_ids = [i.operands[-1] for i in m.annotations if i.opname == "OpDecorate"]
    assert spec_ids == [0, 1]
    assert [i.opname for i in m.globals][-2:] == ["OpSpecConstant", "OpSpecConstant"]
    flag = m.spec_constant(m.type_bool(), True, 2)
    assert m.globals[-1].opname == "OpSpecConstantTrue" and m.globals[-1].result is flag
    doubled = m.spec_constant_op(u32, "OpIMul", first, m.constant(u32, 2))
    assert m.spec_constant_op(u32, "OpIMul", first, m.constant(u32, 2)) is doubled
    assert m.spec_constant_op(u32, "OpIMul", second, m.constant(u32, 2)) is not doubled
