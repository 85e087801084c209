"""coopnn's own kernel programs (`coopnn/shaders/kernel/program.py`) as valid tensor language, with coopnn's
extension (coopvector types, `coopnn.<op>` instructions, floating attributes; docs/tensor-language.md), and back.

    text = kernel_text(program)                     # func @name(%in0: memref<f32x10x?> {...}, ..., %n: index) ...
    again = kernel_program(parse(text), program.constants, program.sources)   # the same program, for any target

The text holds the program's structure (parameters with their roles, instructions with their attributes); the
constants (weights) stay outside it, as they do today, and are given back on the way in.
"""

from __future__ import annotations

import re

from coopnn.errors import InputError
from coopnn.shaders.kernel.program import Instr, KernelProgram, Param, VecType
from coopnn.tl import ast
from coopnn.tl.parse_types import memref_type
from coopnn.tl.parser import parse
from coopnn.tl.printer import print_program
from coopnn.tl.scanner import IDENTIFIER, Scanner
from coopnn.tl.types import INDEX, CoopVectorType, MemrefType

ROLE, GRAPH_NAME, NAME = "coopnn.role", "coopnn.graph_name", "coopnn.name"
PER_SAMPLE = ("input", "output", "tape", "loss")  # memref<f32xFx?>: F features per sample
LOCAL = re.compile(IDENTIFIER)

def _fresh(used: set[str], stem: str) -> str:
    """`stem`, or stem followed by a number, whichever no parameter or value of the program is called."""
    name, index = stem, 0
    while name in used:
        index += 1
        name = f"{stem}{index}"
    used.add(name)
    return name


def _identifier(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "kernel"
    return cleaned if cleaned[0].isalpha() else "k_" + cleaned


def _attributes(attrs) -> ast.DictAttr:
    return ast.DictAttr(tuple(sorted((k, v) for k, v in attrs.items())))


def _local_names(program: KernelProgram) -> dict[str, str]:
    """Kernel name -> local identifier: itself where it is one; parameters named otherwise (`layer.0.weight`) get
    one made of its letters, digits and underscores, their own name kept in an argument attribute."""
    values = [i.result for i in program.body if i.result is not None]
    bad = [v for v in values if not LOCAL.fullmatch(v)]
    if bad:
        raise InputError(f"kernel {program.name!r}: values {bad[:3]} are not tensor-language identifiers")
    used = set(values) | {p.name for p in program.params if LOCAL.fullmatch(p.name)}
    names = {v: v for v in values}
    for param in program.params:
        names[param.name] = param.name if LOCAL.fullmatch(param.name) else _fresh(used, _identifier(param.name))
    return names


def _instruction(instr: Instr, names: dict[str, str]) -> ast.Extension:
    results = (ast.Value(instr.result),) if instr.result is not None else ()
    kind = CoopVectorType(instr.type.dtype, instr.type.size) if instr.type is not None else None
    return ast.Extension(results=results, op=instr.op, operands=tuple(ast.Value(names[a]) for a in instr.args),
                         attributes=_attributes(instr.attrs), type=kind)


def _argument(param: Param, names: dict[str, str]) -> ast.Argument:
    memref = memref_type(Scanner(param.memref))
    attributes = {ROLE: param.role, GRAPH_NAME: param.graph_name}
    if names[param.name] != param.name:
        attributes[NAME] = param.name
    return ast.Argument(ast.Value(names[param.name]), memref, ast.DictAttr(tuple(sorted(attributes.items()))))


def kernel_function(program: KernelProgram, work_group_size: int = 64) -> ast.Function:
    """`program` as a tensor-language function: one sample per work-item, `foreach` over the `%n` samples (the last
    argument; `%n`, `%c0` and `%i` renamed where the program uses those names)."""
    names = _local_names(program)
    used = set(names.values())
    count, zero, sample = (ast.Value(_fresh(used, stem)) for stem in ("n", "c0", "i"))
    arguments = tuple(_argument(p, names) for p in program.params) + (ast.Argument(count, INDEX),)
    start = ast.Constant(results=(zero,), value=0, type=INDEX)
    loop = ast.Foreach(variables=(sample,), starts=(zero,), stops=(count,),
                       body=ast.Region(tuple(_instruction(i, names) for i in program.body)))
    attributes = ast.DictAttr(((NAME, program.name), ("work_group_size", (work_group_size, 1))))
    return ast.Function(_identifier(program.name), arguments, attributes, ast.Region((start, loop)))


def kernel_text(program: KernelProgram, work_group_size: int = 64) -> str:
    """The canonical tensor-language text of `program`."""
    return print_program(ast.Program((kernel_function(program, work_group_size),)))


def _param(argument: ast.Argument) -> Param:
    role = argument.attributes.get(ROLE)
    if not isinstance(argument.type, MemrefType) or role is None:
        raise InputError(f"argument %{argument.value.name} is not a kernel parameter (a memref with {ROLE})")
    shape = argument.type.shape[:1] if role in PER_SAMPLE else argument.type.shape
    name = argument.attributes.get(NAME, argument.value.name)
    return Param(name, role, tuple(shape), argument.attributes.get(GRAPH_NAME, ""))


def _instr(inst: ast.Inst, names: dict[str, str]) -> Instr:
    if not isinstance(inst, ast.Extension):
        raise InputError(f"{inst.span}: a kernel's sample loop holds coopnn instructions only, found "
                         f"{type(inst).__name__}")
    kind = VecType(inst.type.dtype, inst.type.size) if inst.type is not None else None
    return Instr(inst.op, inst.results[0].name if inst.results else None, kind,
                 tuple(names.get(v.name, v.name) for v in inst.operands), dict(inst.attributes.items))


def kernel_program(program: ast.Program | str, constants, sources=None, function: str | None = None) -> KernelProgram:
    """The kernel program a tensor-language function in kernel form (what `kernel_text` writes) describes, with
    `constants` (and `sources`) for its constant parameters."""
    program = parse(program) if isinstance(program, str) else program
    target = program.function(function)
    loop = next((i for i in target.body.instructions if isinstance(i, ast.Foreach)), None)
    if loop is None:
        raise InputError(f"@{target.name} has no foreach over its samples")
    params = tuple(_param(a) for a in target.arguments[:-1])
    names = {a.value.name: p.name for a, p in zip(target.arguments, params)}
    return KernelProgram(target.attributes.get(NAME, target.name), params,
                         tuple(_instr(i, names) for i in loop.body.instructions), constants, sources or {})
