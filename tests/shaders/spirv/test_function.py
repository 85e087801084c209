"""Function bodies: emission at the current block, terminators, local variables, extended instructions."""

from __future__ import annotations

import pytest

from coopnn.shaders.spirv import Module, SpirvBuildError


@pytest.fixture
def module_and_main():
    m = Module()
    return m, m.function(m.type_void(), name="main")


def test_emit_returns_the_result_and_records_its_type(module_and_main):
    m, main = module_and_main
    f32 = m.type_float(32)
    total = main.emit("OpFAdd", f32, m.constant(f32, 1.0), m.constant(f32, 2.0), name="total")
    assert m.type_of(total) is f32
    assert main.emit("OpReturn") is None
    assert [i.opname for i in m.debug_names] == ["OpName", "OpName"]


def test_nothing_may_follow_a_terminator(module_and_main):
    m, main = module_and_main
    main.return_()
    with pytest.raises(SpirvBuildError, match="no open block"):
        main.emit("OpNop")


def test_a_new_block_needs_the_current_one_terminated(module_and_main):
    m, main = module_and_main
    with pytest.raises(SpirvBuildError, match="has no terminator yet"):
        main.start_block(main.new_block())
    target = main.new_block()
    main.emit("OpBranch", target.label)
    main.start_block(target)
    main.return_()
    assert [b.label for b in main.blocks][1] is target.label


def test_global_instructions_are_refused_in_a_body_with_the_helper_to_use(module_and_main):
    m, main = module_and_main
    with pytest.raises(SpirvBuildError, match=r"OpTypeFloat is not emitted into a function body; use Module.type\*"):
        main.emit("OpTypeFloat", 32)
    with pytest.raises(SpirvBuildError, match="use Function.variable"):
        main.emit("OpVariable", m.type_pointer("Function", m.type_float(32)), "Function")
    with pytest.raises(SpirvBuildError, match="use Module.decorate"):
        main.emit("OpDecorate", main.id, "RelaxedPrecision")


def test_local_variables_go_to_the_top_of_the_entry_block(module_and_main):
    m, main = module_and_main
    f32 = m.type_float(32)
    main.emit("OpNop")
    counter = main.variable(f32, name="counter", initializer=m.constant(f32, 0.0))
    main.return_()
    opnames = [i.opname for i in main.instructions()]
    assert opnames == ["OpFunction", "OpLabel", "OpVariable", "OpNop", "OpReturn", "OpFunctionEnd"]
    assert m.type_of(counter) is m.type_pointer("Function", f32)


def test_unterminated_block_is_reported_at_assembly(module_and_main):
    m, main = module_and_main
    with pytest.raises(SpirvBuildError, match="has no terminator"):
        main.instructions()


def test_ext_inst_imports_the_set_once_and_checks_the_operand_count(module_and_main):
    m, main = module_and_main
    f32 = m.type_float(32)
    x = m.constant(f32, 1.0)
    main.ext_inst(f32, "Exp", x)
    main.ext_inst(f32, "FMax", x, x)
    assert list(m.ext_inst_imports) == ["GLSL.std.450"]
    with pytest.raises(SpirvBuildError, match="GLSL.std.450 FMax takes 'x' <IdRef>, 'y' <IdRef>; got 1 operands"):
        main.ext_inst(f32, "FMax", x)
    with pytest.raises(SpirvBuildError, match="GLSL.std.450 has no instruction 'Expo'"):
        main.ext_inst(f32, "Expo", x)


def test_functions_with_parameters_and_calls():
    m = Module()
    f32 = m.type_float(32)
    square = m.function(f32, [f32], name="square")
    (x,) = square.params
    square.return_(square.emit("OpFMul", f32, x, x))
    main = m.function(m.type_void(), name="main")
    result = main.emit("OpFunctionCall", f32, square.id, m.constant(f32, 3.0))
    main.return_()
    assert m.type_of(x) is f32 and m.type_of(result) is f32
