"""The parser: syntax errors point at where reading stopped, the reference's slips and legacy spellings are read as
docs/tensor-language.md says, and optional syntax is stored resolved."""

from __future__ import annotations

import pytest

from coopnn.tl import ast, parse
from coopnn.tl.errors import TensorLanguageError
from coopnn.tl.types import MemrefType, ScalarType


def _error(text: str) -> str:
    with pytest.raises(TensorLanguageError) as raised:
        parse(text, "k.tl")
    return str(raised.value)


def test_a_dictionary_without_the_attributes_keyword_is_refused_with_the_fix():
    message = _error("func @m(%a: memref<f32x4>) {work_group_size=[64,1]} {\n}")
    assert message.startswith("k.tl:1.") and "follow the keyword 'attributes'" in message


@pytest.mark.parametrize("text,where,fragment", [
    ("func @f() {\n    %x = frobnicate %y : f32\n}", "2.10-", "unknown instruction 'frobnicate'"),
    ("func @f() {\n    %x = add %a, %b\n}", "3.1-", "expected ':'"),
    ("func @f(%a: memref<f33x4>) {}", "1.20-", "expected a number type"),
    ("func @f(%a: memref<f32x4,strided<1,4>>) {}", "1.", "one stride per mode"),
    ("func @f() {\n    %x = constant 1 : f32", "1.11-", "not closed"),
    ("func @f() {\n    %x, %y = add %a, %b : f32\n}", "2.5-", "defines one value"),
    ("func @f() {\n    %x = gemm.q %a, %b, %c, %d, %e\n}", "2.5-", "defines no value"),
    ("func @f() {\n    gemm.q %a, %b, %c, %d, %e\n}", "2.5-", "no modifier '.q'"),
    ("func @f() {\n    %x = constant 99999999999999999999 : i64\n}", "2.19-", "2^63"),
    ("func @f() {\n    %x = group_id : index\n}", "2.5-", "needs a mode"),
])
def test_syntax_errors_name_the_place_and_what_was_expected(text, where, fragment):
    message = _error(text)
    assert message.startswith(f"k.tl:{where}") and fragment in message, message


def _only(text: str) -> ast.Inst:
    return parse("func @f(%a: memref<f32x4x4>, %x: f32, %i: index) {\n" + text + "\n}").functions[0] \
        .body.instructions[-1]


def test_legacy_comparisons_read_their_immediate_operand_as_a_constant():
    body = parse("func @f(%n: i32) {\n    %l = cmp.lt %n, 16 : i32\n}").functions[0].body.instructions
    constant, compare = body
    assert constant == ast.Constant(results=(ast.Value("imm0"),), value=16, type=ScalarType("i32"))
    assert compare == ast.Compare(results=(ast.Value("l"),), op="less_than", a=ast.Value("n"), b=ast.Value("imm0"))


def test_legacy_math_reads_as_the_math_instruction():
    assert _only("    %e = math.native_exp %x : f32") == ast.Math(results=(ast.Value("e"),), op="native_exp",
                                                                  operand=ast.Value("x"), type=ScalarType("f32"))


def test_integer_indices_read_as_index_constants():
    body = parse("func @f(%a: memref<f32x10x?>, %i: index) {\n    %x = load %a[5, %i] : f32\n}").functions[0] \
        .body.instructions
    assert [type(i).__name__ for i in body] == ["Constant", "Load"] and body[0].value == 5


def test_optional_syntax_is_stored_resolved():
    gemm = _only("    gemm.t %x, %a, %a, %x, %a")
    assert gemm.transposes == ("t", "n") and not gemm.atomic
    update = _only("    %c0 = constant 0 : index\n    %o = atomic_add.release %x, %a[%c0,%c0] : f32")
    assert update.atomic == ast.Atomic("work_group", "release")
    memref = parse("func @f(%a: memref<f32x5x6x7,strided<1,5,30>>) {}").functions[0].arguments[0].type
    assert memref == MemrefType(ScalarType("f32"), (5, 6, 7), (1, 5, 30)) and memref.is_default_layout
    attributes = parse('func @f() attributes {work_group_size=[64,1],"custom"=3,alignment=4} {}').functions[0] \
        .attributes
    assert [k for k, _ in attributes.items] == ["alignment", "custom", "work_group_size"]


def test_source_ranges_cover_the_instruction_and_its_operands():
    inst = _only("    %y = add %x, %x : f32")
    assert str(inst.span) == "2.5-25" and str(inst.a.span) == "2.14-15"


def test_floating_constants_read_in_every_spelling_of_the_reference():
    values = [parse(f"func @f() {{\n    %x = constant {text} : f64\n}}").functions[0].body.instructions[0].value
              for text in ("1.5", ".5", "1.", "1e3", "-2.5e-3", "0x1.8p1", "0x1p-2", "inf", "-inf")]
    assert values == [1.5, 0.5, 1.0, 1000.0, -2.5e-3, 3.0, 0.25, float("inf"), float("-inf")]
