"""The instruction parser's frame: a registry from instruction name to the function that reads the rest of it,
the opcode with its dot modifiers, regions, and the helpers every instruction's reader shares.

Readers live in parse_ops.py, parse_memory.py, parse_control.py and parse_coopmatrix.py, each registering its
instruction names with `@reads(...)`; parser.py imports them by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from coopnn.registry import registrar
from coopnn.tl.ast import Atomic, Constant, Inst, Region, Value
from coopnn.tl.types import INDEX
from coopnn.tl.scanner import Scanner

Reader = Callable[["Opcode", Scanner], list[Inst]]
READERS: dict[str, Reader] = {}

MEMORY_SCOPES = ("cross_device", "device", "work_group", "subgroup")
MEMORY_SEMANTICS = ("relaxed", "acquire", "release", "acquire_release", "sequentially_consistent")
TRANSPOSES = ("n", "t")


# `@reads(name, ...)` registers a reader for the instructions called `name` (the opcode before its first dot).
reads = registrar(READERS)


@dataclass
class Opcode:
    """An instruction being read: its name, the dot modifiers not consumed yet, the values left of `=`, and where it
    starts."""

    name: str
    modifiers: list[str]
    results: tuple[Value, ...]
    start: int
    scanner: Scanner
    fresh: FreshNames
    implied: list[Inst] = field(default_factory=list)  # instructions the text implies before this one

    def immediate(self, value, value_type) -> Value:
        """A value for an immediate constant written where the grammar wants a local identifier (the reference's
        examples do this), defined by a constant instruction placed before the instruction being read."""
        name = Value(self.fresh.take("imm"), self.scanner.span(self.start))
        self.implied.append(Constant(results=(name,), span=name.span, value=value, type=value_type))
        return name

    def take(self, choices: tuple[str, ...]) -> str | None:
        """The next modifier if it is one of `choices` (consumed), else None."""
        if self.modifiers and self.modifiers[0] in choices:
            return self.modifiers.pop(0)
        return None

    def take_atomic(self) -> Atomic:
        scope = self.take(MEMORY_SCOPES) or "work_group"
        return Atomic(scope, self.take(MEMORY_SEMANTICS) or "relaxed")

    def results_count(self, count: int) -> None:
        if len(self.results) != count:
            what = "no value" if count == 0 else "one value" if count == 1 else f"{count} values"
            raise self.scanner.error(f"{self.name} defines {what}; {len(self.results)} named left of '='",
                                     self.start)

    def span(self):
        return self.scanner.span(self.start)


def finish(op: Opcode, node_type: type, /, **fields) -> list[Inst]:
    """The instruction `node_type(**fields)` spanning what was read, once every modifier was understood."""
    if op.modifiers:
        raise op.scanner.error(f"{op.name} has no modifier '.{op.modifiers[0]}'", op.start)
    return op.implied + [node_type(results=op.results, span=op.span(), **fields)]


def fixed_operands(s: Scanner, count: int) -> tuple[Value, ...]:
    """`count` local identifiers separated by commas: an instruction's operands where their number is fixed."""
    values = [s.local()]
    for _ in range(count - 1):
        s.expect(",")
        values.append(s.local())
    return tuple(values)


def bracketed_integer(s: Scanner, what: str) -> int:
    """`[ integer ]`, the integer described as `what` where it is missing."""
    s.expect("[")
    value = s.integer(what)
    s.expect("]")
    return value


def local_list(s: Scanner) -> tuple[Value, ...]:
    values = [s.local()]
    while s.eat(","):
        values.append(s.local())
    return tuple(values)


def parenthesized_locals(s: Scanner, allow_empty: bool = False) -> tuple[Value, ...]:
    s.expect("(")
    if allow_empty and s.eat(")"):
        return ()
    values = local_list(s)
    s.expect(")")
    return values


def index_list(op: Opcode, s: Scanner) -> tuple[Value, ...]:
    """`[ [local-identifier-list] ]`; an integer constant in the list (as in the reference's load examples) is read
    as an index constant."""
    def index() -> Value:
        return op.immediate(s.integer(), INDEX) if s.peek_integer() else s.local("an index")

    s.expect("[")
    return tuple(s.items_until("]", index, "between indices"))


def region(s: Scanner, fresh: FreshNames) -> Region:
    start = s.skip()
    s.expect("{", "opening a region")
    instructions: list[Inst] = []
    while not s.eat("}"):
        if s.at_end():
            raise s.error("the region is not closed: expected '}'", start)
        instructions.extend(instruction(s, fresh))
    return Region(tuple(instructions), s.span(start))


class FreshNames:
    """Names for values the parser introduces (the legacy comparison's immediate operands), none used in the text."""

    def __init__(self, text: str):
        self.used = set(re.findall(r"%([A-Za-z0-9_]+)", text))

    def take(self, stem: str) -> str:
        index = 0
        while f"{stem}{index}" in self.used:
            index += 1
        name = f"{stem}{index}"
        self.used.add(name)
        return name


def instruction(s: Scanner, fresh: FreshNames) -> list[Inst]:
    """One instruction (sometimes preceded by instructions it implies); see the reference's Instructions section."""
    start = s.skip()
    results: tuple[Value, ...] = ()
    if s.peek_local():
        results = local_list(s)
        s.expect("=", "after the values an instruction defines")
    opcode_start = s.skip()
    opcode = s.opcode()
    if opcode is None:
        raise s.error(f"expected an instruction, found {s.found()}")
    name, *modifiers = opcode.split(".")
    reader = READERS.get(name)
    if reader is None:
        raise s.error(f"unknown instruction {name!r}", opcode_start)
    return reader(Opcode(name, modifiers, results, start, s, fresh), s)
