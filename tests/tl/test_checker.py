"""Each class of diagnostic the checker gives, with the source range it points at (the reference's `line.column-column`
style), and a clean program giving none."""

from __future__ import annotations

import pytest

from coopnn.tl import check, checked, parse
from coopnn.tl.errors import TensorLanguageError

HEADER = "func @f(%A: memref<f32x4x8>, %B: memref<f32x8x4>, %v: memref<f32x8>, %n: index, %x: f32, %i: i32) {\n"

# (what is wrong, the body's lines (line 2 on), the diagnostic's start, a fragment of its message)
NEGATIVE = [
    ("undefined value", "    %y = add %x, %q : f32", "2.18-19", "Undefined value %q"),
    ("twice defined", "    %y = add %x, %x : f32\n    %y = add %x, %x : f32", "3.5-6", "defined twice"),
    ("operand type", "    %y = add %x, %i : f32", "2.18-19", "Operand type must match return type"),
    ("operation type", "    %y = shl %x, %x : f32", "2.5-", "shl does not take f32"),
    ("comparison", "    %c = less_than %x, %i : bool", "2.24-25", "Operand types must match"),
    ("complex order", "    %z = cast %x : c32\n    %c = less_than %z, %z : bool", "3.5-", "complex"),
    ("forbidden cast", "    %z = cast %x : c32\n    %r = cast %z : f32", "3.5-", "forbidden"),
    ("cast of a memref", "    %r = cast %A : f32", "2.15-16", "number type"),
    ("constant type", "    %k = constant 1.5 : i32", "2.5-", "integer constant"),
    ("constant range", "    %k = constant 300 : i8", "2.5-", "does not fit in i8"),
    ("math type", "    %k = sin %i : i32", "2.5-", "sin does not take i32"),
    ("load type", "    %c0 = constant 0 : index\n    %y = load %A[%c0, %c0] : f64", "3.5-", "element type"),
    ("index count", "    %c0 = constant 0 : index\n    %y = load %A[%c0] : f32", "3.5-", "number of indices"),
    ("index type", "    %y = load %v[%i] : f32", "2.18-19", "index type"),
    ("store type", "    %c0 = constant 0 : index\n    store %i, %v[%c0]", "3.11-12", "Value type"),
    ("gemm shape", "    gemm %x, %A, %A, %x, %B", "2.5-", "Shape mismatch"),
    ("gemm order", "    gemm %x, %v, %B, %x, %B", "2.5-", "order(A)"),
    ("promotion", "    %d = cast %x : f64\n    axpby %d, %v, %x, %v", "3.5-", "promotable"),
    ("atomic beta", "    axpby.atomic %x, %v, %x, %v", "2.26-27", "beta must be a constant 0 or 1"),
    ("collective in spmd", "    parallel {\n        sum %x, %A, %x, %v\n    }", "3.9-", "must not appear in an SPMD"),
    ("spmd in collective", "    %s = subgroup_local_id : i32", "2.5-", "must not appear in a collective"),
    ("subgroup op in collective", "    %s = subgroup_reduce_add %x : f32", "2.5-", "SPMD instruction"),
    ("foreach types", "    foreach (%k) = (%n), (%i) {\n    }", "2.27-28", "must match"),
    ("if condition", "    if %x {\n    }", "2.8-9", "boolean type"),
    ("if without else", "    %t = constant true : bool\n    %r = if %t -> (f32) {\n        yield (%x)\n    }", "3.5-",
     "needs an else region"),
    ("yield types", "    %t = constant true : bool\n    %r = if %t -> (f32) {\n        yield (%i)\n    } else {\n"
     "        yield (%x)\n    }", "4.9-", "Yielded types (i32) must match"),
    ("misplaced yield", "    yield (%x)", "2.5-", "yield must be the last"),
    ("loop bounds", "    %c0 = constant 0 : index\n    for %k=%c0,%i {\n    }", "3.16-17", "identical"),
    ("subview type", "    %c0 = constant 0 : index\n    %s = subview %A[0:2, %c0] : memref<f32x4>", "3.5-",
     "does not match the view's type memref<f32x2>"),
    ("expand product", "    %e = expand %A[1 -> 3x3] : memref<f32x4x3x3>", "2.5-", "product of the expand shape"),
    ("fuse modes", "    %f = fuse %A[1,1] : memref<f32x4x8>", "2.5-", "0 <= from < to"),
    ("size mode", "    %s = size %A[2] : index", "2.5-", "out of range"),
    ("alloca space", "    %t = alloca : memref<f32x4>", "2.5-", "local address space"),
    ("alloca dynamic", "    %t = alloca : memref<f32x?,local>", "2.5-", "known at compile time"),
    ("coopmatrix use", "    parallel {\n        %c0 = constant 0 : index\n"
     "        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<f32x4x8,matrix_acc>\n"
     "        %d = cooperative_matrix_mul_add %a, %a, %a : "
     "coopmatrix<f32x4x4,matrix_acc>\n    }", "5.9-", "A must have use matrix_a"),
    ("coopmatrix element", "    parallel {\n        %c0 = constant 0 : index\n        %a = cooperative_matrix_load "
     "%A[%c0,%c0] : coopmatrix<f16x4x8,matrix_a>\n    }", "4.9-", "component type (f16) must match"),
    ("reduce shape", "    parallel {\n        %c0 = constant 0 : index\n"
     "        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<f32x4x8,matrix_acc>\n"
     "        %r = cooperative_matrix_reduce_add.row %a : "
     "coopmatrix<f32x1x8,matrix_acc>\n    }", "5.9-", "returns coopmatrix<f32x4x1,matrix_acc>"),
]


@pytest.mark.parametrize("what,body,where,message", NEGATIVE, ids=[n[0] for n in NEGATIVE])
def test_each_mistake_gets_its_diagnostic(what, body, where, message):
    diagnostics = check(parse(HEADER + body + "\n}\n"))
    assert diagnostics, f"no diagnostic for {what}"
    first = diagnostics[0]
    assert str(first.span).startswith(where) and message in first.message, str(first)


def test_function_level_diagnostics():
    text = """func @f(%c: coopmatrix<f32x8x8,matrix_acc>, %a: memref<f16x4> {alignment=3},
               %b: memref<f32x4x4,strided<1,2>>) attributes {work_group_size=[24,1], subgroup_size=16} { }
func @f() { }"""
    messages = [d.message for d in check(parse(text))]
    assert any("first mode of work_group_size (24)" in m for m in messages)
    assert any("must not have coopmatrix" in m for m in messages)
    assert any("alignment must be a multiple of the element size (2)" in m for m in messages)
    assert any("Invalid layout" in m for m in messages)
    assert any("defined twice" in m for m in messages)


def test_checked_raises_with_every_diagnostic_in_order():
    with pytest.raises(TensorLanguageError) as raised:
        checked(parse(HEADER + "    %y = add %x, %q : f32\n    %z = add %x, %w : f32\n}\n"),
                "k.tl")
    assert str(raised.value) == "k.tl:2.18-19: Undefined value %q\nk.tl:3.18-19: Undefined value %w"


def test_one_mistake_gives_one_diagnostic():
    diagnostics = check(parse(HEADER + "    %y = add %x, %q : f32\n    %z = add %y, %y : f32\n"
                                       "    %w = mul %z, %z : f32\n}\n"))
    assert len(diagnostics) == 1


def test_a_correct_program_has_no_diagnostic():
    assert check(parse(HEADER + "    %c0 = constant 0 : index\n    foreach (%k) = (%c0), (%n) {\n"
                                "        %y = load %v[%k] : f32\n        %z = mul %y, %x : f32\n"
                                "        store %z, %v[%k]\n    }\n    sum.t %x, %A, %x, %v\n}\n")) == []
