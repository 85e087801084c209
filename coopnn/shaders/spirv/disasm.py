"""A text dump of SPIR-V words in spirv-dis's syntax, for golden tests and debugging; spirv-as reads it back.

Ids get friendly names as spirv-dis gives them: the OpName when there is one, otherwise a name built from the type or
constant (%float, %v3uint, %_ptr_StorageBuffer_float, %uint_0), otherwise the number. With `raw_ids`, every id is its
number. Operands are decoded through the same grammar table the builder encodes with.
"""

from __future__ import annotations

import re
import struct
from typing import Sequence

from coopnn.shaders.spirv.errors import SpirvBuildError
from coopnn.shaders.spirv.grammar import ID_KINDS, Grammar, InstructionSpec, OperandSpec, grammar
from coopnn.shaders.spirv.literals import NumberFormat, format_number, string_from_words

INT_TYPE_NAMES = {(8, 0): "uchar", (8, 1): "char", (16, 0): "ushort", (16, 1): "short", (32, 0): "uint",
                  (32, 1): "int", (64, 0): "ulong", (64, 1): "long"}
FLOAT_TYPE_NAMES = {16: "half", 32: "float", 64: "double"}
RESULT_COLUMN = 12  # right edge of "%name" before " = ", as spirv-dis indents


class IdRef(int):
    """A decoded operand that is an id (the number), as opposed to literal text."""


def _words(binary: Sequence[int] | bytes) -> list[int]:
    if isinstance(binary, (bytes, bytearray)):
        if len(binary) % 4:
            raise SpirvBuildError(f"SPIR-V binary of {len(binary)} bytes is not whole words")
        return list(struct.unpack(f"<{len(binary) // 4}I", binary))
    return list(binary)


class _Decoder:
    """Decodes one instruction's operand words into IdRef numbers and literal text."""

    def __init__(self, table: Grammar, formats: dict[int, NumberFormat], ext_sets: dict[int, str]):
        self.grammar = table
        self.formats = formats
        self.ext_sets = ext_sets

    def decode(self, spec: InstructionSpec, words: list[int]) -> list:
        self.spec, self.words, self.position, self.tokens = spec, words, 0, []
        self.operands(spec.operands)
        if self.position != len(words):
            raise SpirvBuildError(f"{spec.opname}: {len(words) - self.position} operand words left over")
        return self.tokens

    def operands(self, specs: Sequence[OperandSpec]) -> None:
        for operand in specs:
            if operand.quantifier == "*":
                while self.position < len(self.words):
                    self.one(operand.kind)
            elif operand.quantifier != "?" or self.position < len(self.words):
                self.one(operand.kind)

    def next_word(self) -> int:
        if self.position >= len(self.words):
            raise SpirvBuildError(f"{self.spec.opname}: operand words run out")
        self.position += 1
        return self.words[self.position - 1]

    def one(self, kind: str) -> None:
        if kind in ID_KINDS:
            self.tokens.append(IdRef(self.next_word()))
            return
        operand_kind = self.grammar.operand_kind(kind)
        decoder = LITERAL_DECODERS.get(kind) or CATEGORY_DECODERS[operand_kind.category]
        decoder(self, operand_kind)

    def integer(self, kind) -> None:
        self.tokens.append(str(self.next_word()))

    def ext_inst_number(self, kind) -> None:
        number = self.next_word()
        set_name = self.ext_sets.get(self.tokens[-1])
        known = set_name in self.grammar.ext_inst_sets()
        self.tokens.append(self.grammar.ext_inst_by_opcode(set_name, number).opname if known else str(number))

    def string(self, kind) -> None:
        text, count = string_from_words(self.words[self.position:])
        self.position += count
        self.tokens.append('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')

    def float32(self, kind) -> None:
        self.tokens.append(format_number(NumberFormat(True, 32), [self.next_word()]))

    def context_number(self, kind) -> None:
        number_format = self.formats.get(self.tokens[0])
        if number_format is None:
            raise SpirvBuildError(f"{self.spec.opname}: result type %{self.tokens[0]} is not a scalar int or float")
        self.tokens.append(format_number(number_format, [self.next_word() for _ in range(number_format.word_count)]))

    def opcode(self, kind) -> None:
        wrapped = self.grammar.instruction_by_opcode(self.next_word())
        self.tokens.append(wrapped.opname[2:])
        self.operands([o for o in wrapped.operands if o.kind not in ("IdResultType", "IdResult")])

    def value_enum(self, kind) -> None:
        enumerant = kind.by_value(self.next_word())
        self.tokens.append(enumerant.name)
        self.operands(enumerant.parameters)

    def bit_enum(self, kind) -> None:
        mask = self.next_word()
        bits = [kind.by_value(1 << b) for b in range(32) if mask >> b & 1]
        zero = kind.values.get(0)
        self.tokens.append("|".join(e.name for e in bits) if bits else zero.name if zero else "0")
        for enumerant in bits:
            self.operands(enumerant.parameters)

    def composite(self, kind) -> None:
        for base in kind.bases:
            self.one(base)


LITERAL_DECODERS = {
    "LiteralInteger": _Decoder.integer,
    "LiteralExtInstInteger": _Decoder.ext_inst_number,
    "LiteralString": _Decoder.string,
    "LiteralFloat": _Decoder.float32,
    "LiteralContextDependentNumber": _Decoder.context_number,
    "LiteralSpecConstantOpInteger": _Decoder.opcode,
}
CATEGORY_DECODERS = {"ValueEnum": _Decoder.value_enum, "BitEnum": _Decoder.bit_enum, "Composite": _Decoder.composite}


def _sanitize(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return f"_{name}" if not name or name[0].isdigit() else name


class _Namer:
    """Friendly names: OpName first, then names derived from types and constants, made unique."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.used: set[str] = set()

    def of(self, number: int) -> str:
        return self.names.get(number, str(number))

    def give(self, number: int, base: str) -> None:
        if number in self.names:
            return
        candidate, suffix = base, 0
        while candidate in self.used:
            candidate, suffix = f"{base}_{suffix}", suffix + 1
        self.used.add(candidate)
        self.names[number] = candidate

    def name_result(self, spec: InstructionSpec, tokens: list) -> None:
        if spec.opname == "OpName":
            self.give(tokens[0], _sanitize(tokens[1][1:-1]))
            return
        derive = DERIVED_NAMES.get(spec.opname)
        position = _result_position(spec)
        result = tokens[position] if derive else None
        base = derive(self, result, tokens[position + 1:], tokens[0] if position else None) if derive else None
        if base:
            self.give(result, _sanitize(base))


def _number_text(text: str) -> str:
    return text.replace("-", "n").replace(".", "_").replace("+", "_")


# opname -> (namer, result, operands after the result, result type) -> a name for the result, as spirv-dis names it.
DERIVED_NAMES = {
    "OpTypeVoid": lambda n, r, ops, t: "void",
    "OpTypeBool": lambda n, r, ops, t: "bool",
    "OpTypeInt": lambda n, r, ops, t: INT_TYPE_NAMES.get((int(ops[0]), int(ops[1]))),
    "OpTypeFloat": lambda n, r, ops, t: ops[1] if len(ops) > 1 else FLOAT_TYPE_NAMES.get(int(ops[0])),
    "OpTypeVector": lambda n, r, ops, t: f"v{ops[1]}{n.of(ops[0])}",
    "OpTypeMatrix": lambda n, r, ops, t: f"mat{ops[1]}{n.of(ops[0])}",
    "OpTypeStruct": lambda n, r, ops, t: f"_struct_{r}",
    "OpTypePointer": lambda n, r, ops, t: f"_ptr_{ops[0]}_{n.of(ops[1])}",
    "OpTypeRuntimeArray": lambda n, r, ops, t: f"_runtimearr_{n.of(ops[0])}",
    "OpTypeArray": lambda n, r, ops, t: f"_arr_{n.of(ops[0])}_{n.of(ops[1])}",
    "OpConstant": lambda n, r, ops, t: f"{n.of(t)}_{_number_text(ops[0])}",
    "OpConstantTrue": lambda n, r, ops, t: "true",
    "OpConstantFalse": lambda n, r, ops, t: "false",
}


def _result_position(spec: InstructionSpec) -> int | None:
    kinds = [o.kind for o in spec.operands]
    return kinds.index("IdResult") if "IdResult" in kinds else None


def _instructions(table: Grammar, words: list[int]) -> list[tuple[InstructionSpec, list[int]]]:
    found, position = [], 5
    while position < len(words):
        count, opcode = words[position] >> 16, words[position] & 0xFFFF
        if count == 0 or position + count > len(words):
            raise SpirvBuildError(f"bad word count {count} at word {position}")
        found.append((table.instruction_by_opcode(opcode), words[position + 1:position + count]))
        position += count
    return found


def disassemble(binary: Sequence[int] | bytes, *, raw_ids: bool = False, header: bool = True) -> str:
    """The module as text, one instruction per line, with spirv-dis's header comments unless `header` is False."""
    table = grammar()
    words = _words(binary)
    if len(words) < 5 or words[0] != table.magic_number:
        raise SpirvBuildError("not a SPIR-V module: missing header or wrong magic number")
    formats: dict[int, NumberFormat] = {}
    ext_sets: dict[int, str] = {}
    decoder, namer = _Decoder(table, formats, ext_sets), _Namer()
    decoded = []
    for spec, operand_words in _instructions(table, words):
        tokens = decoder.decode(spec, operand_words)
        decoded.append((spec, tokens))
        if spec.opname == "OpExtInstImport":
            ext_sets[tokens[0]] = tokens[1][1:-1]
        elif spec.opname in ("OpTypeInt", "OpTypeFloat"):
            formats[tokens[0]] = _number_format(spec.opname, tokens[1:])
        if not raw_ids:
            namer.name_result(spec, tokens)
    lines = _header_lines(words) if header else []
    for spec, tokens in decoded:
        lines.append(_render(spec, tokens, namer))
    return "\n".join(lines) + "\n"


def _number_format(opname: str, operands: list[str]) -> NumberFormat:
    if opname == "OpTypeInt":
        return NumberFormat(False, int(operands[0]), signed=operands[1] == "1")
    return NumberFormat(True, int(operands[0]), encoding=operands[1] if len(operands) > 1 else None)


def _header_lines(words: list[int]) -> list[str]:
    version, generator = words[1], words[2]
    return [
        "; SPIR-V",
        f"; Version: {version >> 16}.{(version >> 8) & 0xFF}",
        f"; Generator: {generator >> 16}; {generator & 0xFFFF}",
        f"; Bound: {words[3]}",
        f"; Schema: {words[4]}",
    ]


def _render(spec: InstructionSpec, tokens: list, namer: _Namer) -> str:
    text = [f"%{namer.of(t)}" if isinstance(t, IdRef) else t for t in tokens]
    if not spec.has_result:
        return " " * (RESULT_COLUMN + 3) + " ".join([spec.opname, *text])
    result = text.pop(_result_position(spec))
    return f"{result:>{RESULT_COLUMN}} = " + " ".join([spec.opname, *text])
