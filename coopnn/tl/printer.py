"""`print_program(program)`: the canonical text of a program, which `parse` reads back into an equal program.

Canonical means: floating constants in hexadecimal (exact), default transpose flags and default atomic scope and
semantics left out, default memref layouts and the global address space left out, attributes sorted by name, four
spaces of indent per region, the reference's spellings (never the legacy `cmp.` and `math.` ones).
"""

from __future__ import annotations

import math

from coopnn.tl import ast
from coopnn.tl.parse_base import MEMORY_SCOPES
from coopnn.tl.parse_types import ATTRIBUTE_NAMES

INDENT = "    "


def constant_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, complex):
        return f"[{constant_text(value.real)}, {constant_text(value.imag)}]"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value.hex()


def attribute_text(value) -> str:
    if isinstance(value, (bool, int, float)):
        return constant_text(value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, ast.DictAttr):
        return dictionary_text(value)
    return "[" + ", ".join(attribute_text(v) for v in value) + "]"


def dictionary_text(attributes: ast.DictAttr) -> str:
    names = (k if k in ATTRIBUTE_NAMES else f'"{k}"' for k, _ in attributes.items)
    return "{" + ",".join(f"{n}={attribute_text(v)}" for n, (_, v) in zip(names, attributes.items)) + "}"


def _v(value: ast.Value) -> str:
    return f"%{value.name}"


def _vs(values) -> str:
    return ", ".join(_v(v) for v in values)


def _index_or_value(item) -> str:
    return _v(item) if isinstance(item, ast.Value) else str(item)


def _atomic(atomic: ast.Atomic | None) -> str:
    if atomic is None:
        return ""
    scope = "" if atomic.scope == MEMORY_SCOPES[2] else f".{atomic.scope}"
    return scope + ("" if atomic.semantics == "relaxed" else f".{atomic.semantics}")


def _transposes(transposes: tuple[str, ...]) -> str:
    kept = list(transposes)
    while kept and kept[-1] == "n":
        kept.pop()
    return "".join(f".{t}" for t in kept)


def _coop_flags(inst) -> str:
    return ("" if inst.transpose == "n" else ".t") + (f".{inst.checked}" if inst.checked else "")


def _position(inst) -> str:
    return f"{_v(inst.tensor)}[{_v(inst.row)},{_v(inst.column)}]"


def _region(region: ast.Region, depth: int) -> str:
    lines = ["{"]
    for inst in region.instructions:
        lines.append(INDENT * (depth + 1) + instruction_text(inst, depth + 1))
    lines.append(INDENT * depth + "}")
    return "\n".join(lines)


def _types(types) -> str:
    return "(" + ",".join(str(t) for t in types) + ")"


def _subview_slice(item: ast.Slice) -> str:
    text = _index_or_value(item.offset)
    return text if item.size is None else f"{text}:{_index_or_value(item.size)}"


def _for(i: ast.For, d: int) -> str:
    step = f",{_v(i.step)}" if i.step is not None else ""
    text = f"for {_v(i.variable)}={_v(i.start)},{_v(i.stop)}{step}"
    if i.carried:
        inits = ",".join(f"{_v(c)}={_v(v)}" for c, v in zip(i.carried, i.initial))
        text += f" init({inits}) -> {_types(i.types)}"
    text += " " + _region(i.body, d)
    return text + (f" attributes {dictionary_text(i.attributes)}" if i.attributes.items else "")


def _if(i: ast.If, d: int) -> str:
    text = f"if {_v(i.condition)}" + (f" -> {_types(i.types)}" if i.types else "") + " " + _region(i.then, d)
    return text + (" else " + _region(i.otherwise, d) if i.otherwise is not None else "")


def _ranges(i) -> str:
    return f"({_vs(i.variables)})=({_vs(i.starts)}),({_vs(i.stops)})"


def _collective(i: ast.Collective, d: int) -> str:
    name = i.op + (".atomic" if i.atomic else "") + _transposes(i.transposes)
    if i.mode is None:
        return f"{name} {_vs(i.operands)}"
    return f"{name} {_vs(i.operands[:2])}, {i.mode}, {_vs(i.operands[2:])}"


PRINTERS = {
    ast.Alloca: lambda i, d: "alloca " + (dictionary_text(i.attributes) + " " if i.attributes.items else "")
    + f": {i.type}",
    ast.Collective: _collective,
    ast.LifetimeStop: lambda i, d: f"lifetime_stop {_v(i.operand)}",
    ast.Foreach: lambda i, d: f"foreach {_ranges(i)} {_region(i.body, d)}",
    ast.ForeachTile: lambda i, d: f"foreach_tile {_ranges(i)} as ({_vs(i.sizes)})<=("
    + ",".join(map(str, i.tile_shape)) + f") {_region(i.body, d)}",
    ast.Parallel: lambda i, d: f"parallel {_region(i.body, d)}",
    ast.Arith: lambda i, d: f"{i.op} {_v(i.a)}, {_v(i.b)} : {i.type}",
    ast.Unary: lambda i, d: f"{i.op} {_v(i.a)} : {i.type}",
    ast.Associated: lambda i, d: f"associated {_v(i.operand)} : bool",
    ast.AtomicLoad: lambda i, d: f"atomic_load{_atomic(i.atomic)} {_v(i.tensor)}[{_vs(i.indices)}] : {i.type}",
    ast.AtomicStore: lambda i, d: f"atomic_store{_atomic(i.atomic)} {_v(i.value)}, {_v(i.tensor)}[{_vs(i.indices)}]",
    ast.AtomicUpdate: lambda i, d: f"atomic_{i.op}{_atomic(i.atomic)} {_v(i.value)}, "
    f"{_v(i.tensor)}[{_vs(i.indices)}] : {i.type}",
    ast.Barrier: lambda i, d: "barrier" + (".global" if i.fence_global else "") + (".local" if i.fence_local else ""),
    ast.Builtin: lambda i, d: i.name + (f".{i.axis}" if i.axis else "") + f" : {i.type}",
    ast.Cast: lambda i, d: f"cast {_v(i.operand)} : {i.type}",
    ast.Compare: lambda i, d: f"{i.op} {_v(i.a)}, {_v(i.b)} : bool",
    ast.Constant: lambda i, d: f"constant {constant_text(i.value)} : {i.type}",
    ast.Expand: lambda i, d: f"expand {_v(i.tensor)}[{i.mode}->" + "x".join(map(_index_or_value, i.shape))
    + f"] : {i.type}",
    ast.For: _for,
    ast.Fuse: lambda i, d: f"fuse {_v(i.tensor)}[{i.first},{i.last}] : {i.type}",
    ast.If: _if,
    ast.Load: lambda i, d: f"load {_v(i.tensor)}[{_vs(i.indices)}] : {i.type}",
    ast.Math: lambda i, d: f"{i.op} {_v(i.operand)} : {i.type}",
    ast.Size: lambda i, d: f"size {_v(i.tensor)}[{i.mode}] : index",
    ast.Subview: lambda i, d: f"subview {_v(i.tensor)}[" + ",".join(map(_subview_slice, i.slices)) + f"] : {i.type}",
    ast.Store: lambda i, d: f"store {_v(i.value)}, {_v(i.tensor)}[{_vs(i.indices)}]",
    ast.Yield: lambda i, d: f"yield ({_vs(i.values)})",
    ast.CoopApply: lambda i, d: f"cooperative_matrix_apply ({_v(i.row)},{_v(i.column)},{_v(i.element)})="
    f"{_v(i.operand)} -> {i.type} {_region(i.body, d)}",
    ast.CoopLoad: lambda i, d: ("cooperative_matrix_atomic_load" if i.atomic else "cooperative_matrix_load")
    + _coop_flags(i) + _atomic(i.atomic) + f" {_position(i)} : {i.type}",
    ast.CoopStore: lambda i, d: ("cooperative_matrix_atomic_store" if i.atomic else "cooperative_matrix_store")
    + _coop_flags(i) + _atomic(i.atomic) + f" {_v(i.value)}, {_position(i)}",
    ast.CoopAtomicUpdate: lambda i, d: f"cooperative_matrix_atomic_{i.op}" + _coop_flags(i) + _atomic(i.atomic)
    + f" {_v(i.value)}, {_position(i)} : {i.type}",
    ast.CoopConstruct: lambda i, d: f"cooperative_matrix_construct {_v(i.operand)} : {i.type}",
    ast.CoopExtract: lambda i, d: f"cooperative_matrix_extract {_v(i.operand)}[{i.index}] : {i.type}",
    ast.CoopInsert: lambda i, d: f"cooperative_matrix_insert {_v(i.value)}, {_v(i.matrix)}[{i.index}] : {i.type}",
    ast.CoopMulAdd: lambda i, d: f"cooperative_matrix_mul_add {_vs((i.a, i.b, i.c))} : {i.type}",
    ast.CoopPrefetch: lambda i, d: f"cooperative_matrix_prefetch {i.level}, {_position(i)}, {i.rows}, {i.columns}",
    ast.CoopReduce: lambda i, d: f"cooperative_matrix_reduce_{i.op}.{i.mode} {_v(i.operand)} : {i.type}",
    ast.CoopScale: lambda i, d: f"cooperative_matrix_scale {_v(i.scalar)}, {_v(i.matrix)} : {i.type}",
    ast.SubgroupBroadcast: lambda i, d: f"subgroup_broadcast {_v(i.value)}, {_v(i.index)} : {i.type}",
    ast.SubgroupOp: lambda i, d: f"subgroup_{i.kind}_{i.op} {_v(i.operand)} : {i.type}",
    ast.Extension: lambda i, d: f"coopnn.{i.op}" + (f" {_vs(i.operands)}" if i.operands else "")
    + (f" {dictionary_text(i.attributes)}" if i.attributes.items else "") + (f" : {i.type}" if i.type else ""),
}


def instruction_text(inst: ast.Inst, depth: int = 0) -> str:
    text = PRINTERS[type(inst)](inst, depth)
    return f"{_vs(inst.results)} = {text}" if inst.results else text


def _argument(argument: ast.Argument) -> str:
    attributes = f" {dictionary_text(argument.attributes)}" if argument.attributes.items else ""
    return f"{_v(argument.value)}: {argument.type}{attributes}"


def function_text(function: ast.Function) -> str:
    arguments = ", ".join(_argument(a) for a in function.arguments)
    results = f" -> {_types(function.results)}" if function.results else ""
    attributes = f" attributes {dictionary_text(function.attributes)}" if function.attributes.items else ""
    return f"func @{function.name}({arguments}){results}{attributes} {_region(function.body, 0)}\n"


def print_program(program: ast.Program) -> str:
    return "\n".join(function_text(f) for f in program.functions)
