"""Readers of the scalar instructions: arithmetic, comparison, math, cast, constant, builtins and subgroup operations,
with the legacy spellings the reference's own examples use (`cmp.lt`, `math.native_exp`)."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.parse_base import Opcode, finish, fixed_operands, reads
from coopnn.tl.parse_types import any_type, constant, coopmatrix_type, dictionary, number_type, scalar_type
from coopnn.tl.scanner import Scanner

ARITH_BINARY = ("add", "sub", "mul", "div", "rem", "max", "min", "shl", "shr", "and", "or", "xor")
ARITH_UNARY = ("abs", "neg", "not", "conj", "im", "re")
COMPARISONS = ("equal", "not_equal", "greater_than", "greater_than_equal", "less_than", "less_than_equal")
LEGACY_COMPARISONS = {"eq": "equal", "ne": "not_equal", "gt": "greater_than", "ge": "greater_than_equal",
                      "lt": "less_than", "le": "less_than_equal"}
MATH_UNARY = ("cos", "sin", "exp", "exp2", "log", "log2", "native_cos", "native_sin", "native_exp", "native_exp2",
              "native_log", "native_log2")
MIXED_BUILTINS = ("group_id", "num_groups", "num_subgroups", "subgroup_size")
SPMD_BUILTINS = ("subgroup_id", "subgroup_linear_id", "subgroup_local_id")
THREE_DIMENSIONAL = ("group_id", "num_groups", "num_subgroups", "subgroup_id")
AXES = ("x", "y", "z")
SUBGROUP_KINDS = ("exclusive_scan", "inclusive_scan", "reduce")
SUBGROUP_OPERATIONS = tuple(f"subgroup_{k}_{o}" for k in SUBGROUP_KINDS for o in ("add", "max", "min"))


def _value_type(s: Scanner):
    """What an arithmetic result may be: bool, a number type or a coopmatrix type."""
    if s.peek("coopmatrix<"):
        return coopmatrix_type(s)
    return scalar_type(s)


@reads(*ARITH_BINARY)
def _arith(op: Opcode, s: Scanner):
    op.results_count(1)
    a, b = fixed_operands(s, 2)
    s.expect(":")
    return finish(op, ast.Arith, op=op.name, a=a, b=b, type=_value_type(s))


@reads(*ARITH_UNARY)
def _unary(op: Opcode, s: Scanner):
    op.results_count(1)
    a = s.local()
    s.expect(":")
    return finish(op, ast.Unary, op=op.name, a=a, type=_value_type(s))


@reads(*COMPARISONS)
def _compare(op: Opcode, s: Scanner):
    op.results_count(1)
    a, b = fixed_operands(s, 2)
    s.expect(":")
    s.expect_word("bool", "(a comparison returns bool)")
    return finish(op, ast.Compare, op=op.name, a=a, b=b)


def _operand_or_immediate(s: Scanner):
    return s.local() if s.peek_local() else constant(s)


@reads("cmp")
def _legacy_compare(op: Opcode, s: Scanner):
    """`cmp.lt %a, %b : T`, the spelling of the reference's examples: T is the operands' type (or bool), and an
    operand may be an immediate constant, read as a constant instruction of type T placed before the comparison."""
    condition = op.take(tuple(LEGACY_COMPARISONS))
    if condition is None:
        raise s.error(f"cmp needs a condition: cmp.{', cmp.'.join(LEGACY_COMPARISONS)}", op.start)
    op.results_count(1)
    operands = [_operand_or_immediate(s)]
    s.expect(",")
    operands.append(_operand_or_immediate(s))
    s.expect(":")
    operand_type = scalar_type(s)
    for index, operand in enumerate(operands):
        if not isinstance(operand, ast.Value):
            if operand_type.is_bool and not isinstance(operand, bool):
                raise s.error("an immediate comparison operand needs the operand type after ':'", op.start)
            operands[index] = op.immediate(operand, operand_type)
    return finish(op, ast.Compare, op=LEGACY_COMPARISONS[condition], a=operands[0], b=operands[1])


@reads(*MATH_UNARY)
def _math(op: Opcode, s: Scanner):
    op.results_count(1)
    a = s.local()
    s.expect(":")
    return finish(op, ast.Math, op=op.name, operand=a, type=number_type(s))


@reads("math")
def _legacy_math(op: Opcode, s: Scanner):
    """`math.exp %a : f32`, the spelling of the reference's examples."""
    name = op.take(MATH_UNARY)
    if name is None:
        raise s.error(f"math needs an operation: math.{', math.'.join(MATH_UNARY)}", op.start)
    op.name = name
    return _math(op, s)


@reads("cast")
def _cast(op: Opcode, s: Scanner):
    op.results_count(1)
    a = s.local()
    s.expect(":")
    target = coopmatrix_type(s) if s.peek("coopmatrix<") else number_type(s)
    return finish(op, ast.Cast, operand=a, type=target)


@reads("constant")
def _constant(op: Opcode, s: Scanner):
    op.results_count(1)
    value = constant(s)
    s.expect(":")
    return finish(op, ast.Constant, value=value, type=_value_type(s))


@reads(*MIXED_BUILTINS, *SPMD_BUILTINS)
def _builtin(op: Opcode, s: Scanner):
    op.results_count(1)
    axis = op.take(AXES) if op.name in THREE_DIMENSIONAL else None
    if op.name in THREE_DIMENSIONAL and axis is None:
        raise s.error(f"{op.name} needs a mode: {op.name}.x, .y or .z", op.start)
    s.expect(":")
    return finish(op, ast.Builtin, name=op.name, axis=axis, type=number_type(s))


@reads("subgroup_broadcast")
def _broadcast(op: Opcode, s: Scanner):
    op.results_count(1)
    value, index = fixed_operands(s, 2)
    s.expect(":")
    return finish(op, ast.SubgroupBroadcast, value=value, index=index, type=number_type(s))


@reads(*SUBGROUP_OPERATIONS)
def _subgroup_operation(op: Opcode, s: Scanner):
    op.results_count(1)
    kind, _, operation = op.name.removeprefix("subgroup_").rpartition("_")
    a = s.local()
    s.expect(":")
    return finish(op, ast.SubgroupOp, kind=kind, op=operation, operand=a, type=number_type(s))



@reads("coopnn")
def _extension(op: Opcode, s: Scanner):
    """coopnn's extension: `coopnn.<op> [operands] [{attributes}] [: type]`, the operation named by the modifiers."""
    name = ".".join(op.modifiers)
    if not name:
        raise s.error("coopnn. needs the name of one of coopnn's kernel instructions", op.start)
    op.modifiers = []
    if len(op.results) > 1:
        op.results_count(1)
    operands = [] if not s.peek_local() else [s.local()]
    while operands and s.eat(","):
        operands.append(s.local())
    attributes = dictionary(s) if s.peek("{") else ast.DictAttr()
    result_type = any_type(s) if s.eat(":") else None
    if bool(op.results) != (result_type is not None):
        raise s.error("a coopnn instruction that defines a value states its type after ':' (and only then)", op.start)
    return finish(op, ast.Extension, op=name, operands=tuple(operands), attributes=attributes, type=result_type)
