"""Checks an instruction's operands against the grammar and encodes them into words.

Operands are given in grammar order, the result id left out (the builder supplies it). Each kind takes one Python
form: ids are `Id`s; LiteralInteger an int; LiteralString a str; LiteralFloat a float; LiteralContextDependentNumber a
number in the format of the result type; LiteralSpecConstantOpInteger an opname; a ValueEnum an enumerant name; a
BitEnum a name or a tuple of names; a Composite (pair) a tuple. An enumerant's parameters follow it as further
operands, as in SPIR-V assembly: `("OpDecorate", arr, "ArrayStride", 4)`.
"""

from __future__ import annotations

import struct
from typing import Callable, Sequence

from coopnn.shaders.spirv.errors import SpirvBuildError
from coopnn.shaders.spirv.grammar import ID_KINDS, Availability, Enumerant, Grammar, InstructionSpec, OperandSpec
from coopnn.shaders.spirv.instruction import Id, Instruction, Word
from coopnn.shaders.spirv.literals import NumberFormat, number_words, string_words

NumberFormatOf = Callable[[Id], NumberFormat]


class _OperandEncoder:
    """Walks one instruction's grammar operands, taking values from the caller's operand list in order."""

    def __init__(self, grammar: Grammar, spec: InstructionSpec, values: Sequence, number_format: NumberFormatOf):
        self.grammar = grammar
        self.spec = spec
        self.values = list(values)
        self.position = 0
        self.number_format = number_format
        self.words: list[Word] = []
        self.requirements: list[Availability] = []
        self.result_type: Id | None = None

    def fail(self, message: str) -> SpirvBuildError:
        return SpirvBuildError(f"{self.spec.opname}: {message}; signature: {self.spec.signature}")

    def remaining(self) -> bool:
        return self.position < len(self.values)

    def take(self, operand: OperandSpec, owner: str = "") -> object:
        if not self.remaining():
            raise self.fail(f"missing operand {operand.label}{owner}")
        self.position += 1
        return self.values[self.position - 1]

    def encode_all(self, result: Id | None) -> None:
        for operand in self.spec.operands:
            if operand.kind == "IdResult":
                self.words.append(result)
            else:
                self.encode_quantified(operand)
        if self.remaining():
            raise self.fail(f"{len(self.values) - self.position} operand(s) too many: {self.values[self.position:]!r}")

    def encode_quantified(self, operand: OperandSpec, owner: str = "") -> None:
        """One operand, zero or one ('?'), or all the rest ('*'), taken from the values left."""
        if operand.quantifier == "*":
            while self.remaining():
                self.encode(operand, self.take(operand, owner))
        elif operand.quantifier != "?" or self.remaining():
            self.encode(operand, self.take(operand, owner))

    def encode(self, operand: OperandSpec, value: object) -> None:
        kind = self.grammar.operand_kind(operand.kind)
        encoder = KIND_ENCODERS.get(kind.name) or CATEGORY_ENCODERS[kind.category]
        encoder(self, operand, value)

    def expect(self, operand: OperandSpec, value: object, types: tuple, wanted: str) -> None:
        if isinstance(value, bool) or not isinstance(value, types):
            raise self.fail(f"operand {operand.label} must be {wanted}, got {value!r}")

    def encode_id(self, operand: OperandSpec, value: object) -> None:
        self.expect(operand, value, (Id,), "an Id")
        if operand.kind == "IdResultType":
            self.result_type = value
        self.words.append(value)

    def encode_integer(self, operand: OperandSpec, value: object) -> None:
        self.expect(operand, value, (int,), "an int")
        if not -(1 << 31) <= value < (1 << 32):
            raise self.fail(f"operand {operand.label} {value} does not fit in 32 bits")
        self.words.append(value & 0xFFFFFFFF)

    def encode_string(self, operand: OperandSpec, value: object) -> None:
        self.expect(operand, value, (str,), "a str")
        self.words.extend(string_words(value))

    def encode_float(self, operand: OperandSpec, value: object) -> None:
        self.expect(operand, value, (int, float), "a float")
        self.words.append(struct.unpack("<I", struct.pack("<f", value))[0])

    def encode_context_number(self, operand: OperandSpec, value: object) -> None:
        if self.result_type is None:
            raise self.fail(f"operand {operand.label} needs the result type before it")
        try:
            self.words.extend(number_words(self.number_format(self.result_type), value))
        except SpirvBuildError as err:
            raise self.fail(f"operand {operand.label}: {err}") from None

    def encode_opcode(self, operand: OperandSpec, value: object) -> None:
        """OpSpecConstantOp's opcode, then that instruction's operands (its result type and id left out)."""
        self.expect(operand, value, (str,), "an opname such as 'OpIAdd'")
        wrapped = self.grammar.instruction(value)
        self.words.append(wrapped.opcode)
        for wrapped_operand in wrapped.operands:
            if wrapped_operand.kind not in ("IdResultType", "IdResult"):
                self.encode_quantified(wrapped_operand, f" of {wrapped.opname}")

    def enumerant(self, operand: OperandSpec, name: object) -> Enumerant:
        self.expect(operand, name, (str,), f"a {operand.kind} enumerant name")
        try:
            enumerant = self.grammar.enumerant(operand.kind, name)
        except SpirvBuildError as err:
            raise self.fail(f"operand {operand.label}: {err}") from None
        return enumerant

    def encode_parameters(self, enumerant: Enumerant) -> None:
        self.requirements.append(enumerant.availability)
        for parameter in enumerant.parameters:
            self.encode_quantified(parameter, f" of {enumerant.kind} {enumerant.name}")

    def encode_value_enum(self, operand: OperandSpec, value: object) -> None:
        enumerant = self.enumerant(operand, value)
        self.words.append(enumerant.value)
        self.encode_parameters(enumerant)

    def encode_bit_enum(self, operand: OperandSpec, value: object) -> None:
        names = (value,) if isinstance(value, str) else value
        self.expect(operand, names, (tuple, list, set, frozenset), f"a {operand.kind} name or a tuple of names")
        enumerants = sorted({self.enumerant(operand, name) for name in names}, key=lambda e: e.value)
        self.words.append(sum(e.value for e in enumerants))
        for enumerant in enumerants:
            self.encode_parameters(enumerant)

    def encode_composite(self, operand: OperandSpec, value: object) -> None:
        bases = self.grammar.operand_kind(operand.kind).bases
        self.expect(operand, value, (tuple, list), f"a tuple of {len(bases)} ({', '.join(bases)})")
        if len(value) != len(bases):
            wanted = f"{len(bases)} values ({', '.join(bases)})"
            raise self.fail(f"operand {operand.label} must hold {wanted}, got {value!r}")
        for base, part in zip(bases, value):
            self.encode(OperandSpec(base, name=operand.name), part)


KIND_ENCODERS = {
    "LiteralInteger": _OperandEncoder.encode_integer,
    "LiteralExtInstInteger": _OperandEncoder.encode_integer,
    "LiteralString": _OperandEncoder.encode_string,
    "LiteralFloat": _OperandEncoder.encode_float,
    "LiteralContextDependentNumber": _OperandEncoder.encode_context_number,
    "LiteralSpecConstantOpInteger": _OperandEncoder.encode_opcode,
    **{kind: _OperandEncoder.encode_id for kind in ID_KINDS},
}
CATEGORY_ENCODERS = {
    "ValueEnum": _OperandEncoder.encode_value_enum,
    "BitEnum": _OperandEncoder.encode_bit_enum,
    "Composite": _OperandEncoder.encode_composite,
}


def encode_instruction(
    grammar: Grammar,
    opname: str,
    operands: Sequence,
    number_format: NumberFormatOf,
    result: Id | None = None,
) -> Instruction:
    """Checks `operands` against `opname`'s grammar signature and encodes them. A result id is made when the
    instruction has one and `result` is not given."""
    spec = grammar.instruction(opname)
    if spec.has_result and result is None:
        result = Id()
    encoder = _OperandEncoder(grammar, spec, operands, number_format)
    encoder.encode_all(result)
    return Instruction(
        spec.opname,
        spec.opcode,
        tuple(encoder.words),
        result if spec.has_result else None,
        encoder.result_type,
        (spec.availability, *encoder.requirements),
    )
