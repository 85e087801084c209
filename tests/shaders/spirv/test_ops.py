"""Named instruction helpers: each names one grammar instruction and emits exactly what `Function.emit` would."""

from __future__ import annotations

from coopnn.shaders.spirv import Module
from coopnn.shaders.spirv.ops import Ops


def helpers() -> dict[str, str]:
    return {name: value.opname for name, value in vars(Ops).items() if hasattr(value, "opname")}


def test_every_helper_names_a_distinct_grammar_instruction():
    grammar = Module().grammar
    opnames = list(helpers().values())
    assert len(opnames) == len(set(opnames))
    for opname in opnames:
        assert grammar.instruction(opname).opname == opname


def _module(emit_sum):
    m = Module()
    main = m.function(m.type_void(), name="main")
    u32 = m.type_int(32, False)
    emit_sum(main, u32, m.constant(u32, 3), m.constant(u32, 4))
    main.return_()
    m.entry_point(main)
    m.execution_mode(main, "LocalSize", 1, 1, 1)
    return m.to_bytes()


def test_a_helper_emits_what_emit_does():
    by_name = _module(lambda fn, u32, a, b: fn.emit("OpIAdd", u32, fn.emit("OpIMul", u32, a, b), b, name="total"))
    by_helper = _module(lambda fn, u32, a, b: Ops(fn).int_add(u32, Ops(fn).int_mul(u32, a, b), b, name="total"))
    assert by_helper == by_name


def test_helpers_without_a_result_return_none():
    m = Module()
    main = m.function(m.type_void(), name="main")
    u32 = m.type_int(32, False)
    variable = main.variable(u32)
    assert Ops(main).store(variable, m.constant(u32, 1)) is None
    assert m.type_of(Ops(main).load(u32, variable)) is u32
