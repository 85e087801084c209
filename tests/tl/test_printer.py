"""The printer's canonical form: parse(print(p)) == p for every program the tests hold, exact hexadecimal floats,
default flags and layouts left out, attributes sorted, printing idempotent."""

from __future__ import annotations

import pytest

from coopnn.tl import parse, print_program
from tests.tl.collective_cases import cases
from tests.tl.kernels import EXAMPLES
from tests.tl.test_reference import BLOCKS, wrapped

PROGRAMS = [e.text for e in EXAMPLES] + [c.text for c in cases(dtypes=("f32", "c64"))] + [wrapped(b) for b in BLOCKS]


@pytest.mark.parametrize("text", PROGRAMS)
def test_printing_round_trips_and_is_canonical(text):
    program = parse(text)
    printed = print_program(program)
    assert parse(printed) == program
    assert print_program(parse(printed)) == printed


def test_floats_print_exactly_in_hexadecimal():
    printed = print_program(parse("func @f() {\n    %x = constant 0.1 : f64\n    %z = constant [1.5, -0.0] : c64\n}"))
    assert "constant 0x1.999999999999ap-4 : f64" in printed and "[0x1.8000000000000p+0, -0x0.0p+0]" in printed


def test_defaults_are_left_out_and_attributes_sorted():
    text = """func @f(%a: memref<f32x4x4,strided<1,4>,global>, %x: f32)
        attributes {work_group_size=[32,1],subgroup_size=16} {
        gemm.n.n %x, %a, %a, %x, %a
        gemm.n.t %x, %a, %a, %x, %a
        %c0 = constant 0 : index
        %o = atomic_add.work_group.relaxed %x, %a[%c0,%c0] : f32
    }"""
    printed = print_program(parse(text))
    assert "%a: memref<f32x4x4>" in printed and "{subgroup_size=16,work_group_size=[32, 1]}" in printed
    assert "    gemm %x" in printed and "gemm.n.t %x" in printed and "= atomic_add %x" in printed
