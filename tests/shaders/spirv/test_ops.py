"""Named instruction helpers: each names one grammar instruction and emits exactly what `Function.emit` would, and
no module that builds SPIR-V outside the builder types an opcode name itself."""

from __future__ import annotations

import ast
from pathlib import Path

from coopnn.shaders.spirv import Module, SpirvBuildError
from coopnn.shaders.spirv.ops import Ops

SOURCE = Path(__file__).resolve().parents[3] / "coopnn"
BUILDER = SOURCE / "shaders" / "spirv"


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


def test_a_function_carries_its_helpers():
    m = Module()
    main = m.function(m.type_void(), name="main")
    assert isinstance(main.ops, Ops) and main.ops.fn is main


def _docstrings(tree: ast.AST) -> set[int]:
    bodies = [node.body for node in ast.walk(tree)
              if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    return {id(body[0].value) for body in bodies
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)}


def _is_opname(grammar, value) -> bool:
    if not (isinstance(value, str) and value.startswith("Op") and value.isidentifier()):
        return False
    try:
        return grammar.instruction(value).opname == value
    except SpirvBuildError:
        return False


def test_modules_that_build_spir_v_name_instructions_through_ops():
    grammar = Module().grammar
    typed = []
    for path in sorted(SOURCE.rglob("*.py")):
        if BUILDER in path.parents:
            continue
        text = path.read_text()
        if "coopnn.shaders.spirv" not in text and ".emit(" not in text:
            continue
        tree = ast.parse(text)
        docstrings = _docstrings(tree)
        typed += [f"{path.relative_to(SOURCE)}:{node.lineno} {node.value}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and _is_opname(grammar, node.value) and id(node) not in docstrings]
    assert not typed, "opcode names typed in place (use coopnn.shaders.spirv.ops.Ops):\n" + "\n".join(typed)
