"""Reading a model function: tensor-language text whose function maps f32 scalars to f32 scalars with instructions
a model's kernel can fuse (float32 and bool values; constants, arithmetic, abs/neg/not, math, comparisons and `if`
with results). Anything else is a TensorLanguageError naming the line and column of the instruction."""

from __future__ import annotations

import functools

from coopnn.tl import ast
from coopnn.tl.checker import checked
from coopnn.tl.errors import Diagnostic, TensorLanguageError
from coopnn.tl.parser import parse
from coopnn.tl.types import BOOL, F32

FUSED_ARITHMETIC = {F32: ("add", "sub", "mul", "div", "max", "min", "rem"), BOOL: ("and", "or", "xor")}
FUSED_UNARY = {F32: ("abs", "neg"), BOOL: ("not",)}
FUSED_KINDS = (ast.Constant, ast.Arith, ast.Unary, ast.Math, ast.Compare, ast.If, ast.Yield)
SUPPORTED = ("constant (f32, bool), add, sub, mul, div, max, min, rem, and, or, xor, abs, neg, not, the math "
             "instructions, comparisons, if with results, yield")


def _fail(where, message: str) -> TensorLanguageError:
    return TensorLanguageError([Diagnostic(getattr(where, "span", None), message)])


@functools.lru_cache(maxsize=256)
def program(text: str) -> ast.Program:
    """`text` parsed and checked (TensorLanguageError with every diagnostic)."""
    try:
        return checked(parse(text))
    except RecursionError:  # the reader and checker descend into nested regions
        raise _fail(None, "the text nests regions too deeply to be read") from None


def _fusable_instruction(inst: ast.Inst) -> None:
    if not isinstance(inst, FUSED_KINDS):
        raise _fail(inst, f"{type(inst).__name__.lower()} cannot be fused into a model's kernel; fused functions "
                          f"use {SUPPORTED}")
    kind = getattr(inst, "type", None)
    if kind is not None and kind not in (F32, BOOL):
        raise _fail(inst, f"fused functions compute in f32 and bool, not {kind}")
    table = {ast.Arith: FUSED_ARITHMETIC, ast.Unary: FUSED_UNARY}.get(type(inst))
    if table is not None and inst.op not in table[kind]:
        raise _fail(inst, f"{inst.op} on {kind} cannot be fused; fused functions use {SUPPORTED}")
    if isinstance(inst, ast.If) and any(t not in (F32, BOOL) for t in inst.types):
        raise _fail(inst, "fused functions compute in f32 and bool")
    for region in inst.regions():
        for inner in region.instructions:
            _fusable_instruction(inner)


@functools.lru_cache(maxsize=256)
def model_function(text: str, name: str | None = None, arguments: int | None = None,
                   results: int | None = None, use: str = "model function") -> ast.Function:
    """The function `name` (the first one by default) of `text`, checked to be fusable: f32 arguments (`arguments`
    of them where given), f32 results (`results` of them where given) and only fusable instructions."""
    functions = program(text).functions
    if not functions:
        raise TensorLanguageError([Diagnostic(None, f"the {use}'s text defines no function")])
    function = functions[0] if name is None else program(text).function(name)
    if not function.results:
        raise _fail(function, f"@{function.name} has no results; a {use} is a function with results: "
                              f"func @{function.name}(%x: f32) -> (f32) {{ ... yield (%y) }}")
    if arguments is not None and len(function.arguments) != arguments:
        raise _fail(function, f"@{function.name} takes {len(function.arguments)} arguments; a {use} takes "
                              f"{arguments}")
    if results is not None and len(function.results) != results:
        raise _fail(function, f"@{function.name} returns {len(function.results)} values; a {use} returns {results}")
    for argument in function.arguments:
        if argument.type != F32:
            raise _fail(argument.value, f"arguments of a {use} are f32, not {argument.type}")
    if any(t != F32 for t in function.results):
        raise _fail(function, f"a {use} returns f32 values, not ({', '.join(map(str, function.results))})")
    for inst in function.body.instructions:
        _fusable_instruction(inst)
    return function
