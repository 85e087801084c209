"""Constants, deduplicated as they are created: scalars, composites built from Python sequences, nulls, enumerant
values as 32-bit constants (what cooperative vector and matrix instructions take), spec constants and undefs.

Mixed into `Module` (builder.py), whose `_declare`, `decorate`, `type_info`, `number_format`, `type_int` and
`memory_model` it uses.
"""

from __future__ import annotations

from typing import Sequence

from coopnn.shaders.spirv.capabilities import scope_requirements
from coopnn.shaders.spirv.errors import SpirvBuildError
from coopnn.shaders.spirv.instruction import Id
from coopnn.shaders.spirv.literals import number_words

Scalar = bool | int | float


def _repeat_count(builder, operands: tuple) -> tuple:
    element, count = operands
    return (element,) * (count if isinstance(count, int) else builder.constant_value(count))


# Composite type opname -> the types of its constituents, from the type's operands.
COMPOSITE_MEMBERS = {
    "OpTypeVector": _repeat_count,
    "OpTypeMatrix": _repeat_count,
    "OpTypeArray": _repeat_count,
    "OpTypeCooperativeVectorNV": _repeat_count,
    "OpTypeStruct": lambda builder, operands: operands,
}


class ConstantBuilder:
    """constant* methods of `Module`."""

    def constant(self, type_id: Id, value: Scalar | Sequence) -> Id:
        """A constant of any scalar or composite type; a composite takes a sequence of values or ids, one per
        constituent (vector components, array elements, struct members)."""
        opname = self.type_info(type_id).opname
        if opname == "OpTypeBool":
            if not isinstance(value, bool):
                raise SpirvBuildError(f"a bool constant needs True or False, got {value!r}")
            return self._unique_constant(("OpConstantTrue" if value else "OpConstantFalse",), type_id)
        if opname in COMPOSITE_MEMBERS:
            return self._composite_from_values(type_id, value)
        words = tuple(number_words(self.number_format(type_id), value))
        constant = self._unique_constant(("OpConstant", value), type_id, key=("OpConstant", type_id, words))
        self._constant_values[constant] = value
        return constant

    def integer(self, value: int | Id) -> Id:
        """An integer operand that instructions take as an id: an id is kept, an int becomes a 32-bit constant,
        unsigned unless it is negative."""
        if isinstance(value, Id):
            return value
        return self.constant(self.type_int(32, value < 0), value)

    def constant_value(self, constant: Id) -> Scalar:
        """The Python value a scalar constant was made from."""
        try:
            return self._constant_values[constant]
        except KeyError:
            raise SpirvBuildError(f"{constant!r} is not a scalar constant of this module") from None

    def constant_composite(self, type_id: Id, constituents: Sequence[Id]) -> Id:
        return self._unique_constant(("OpConstantComposite", *constituents), type_id)

    def constant_null(self, type_id: Id) -> Id:
        return self._unique_constant(("OpConstantNull",), type_id)

    def undef(self, type_id: Id) -> Id:
        return self._unique_constant(("OpUndef",), type_id)

    def enum_constant(self, kind: str, *names: str) -> Id:
        """A 32-bit unsigned constant holding an enumerant's value (or the OR of several BitEnum names), for operands
        such as Scope, MemorySemantics, ComponentType or CooperativeVectorMatrixLayout that are given as ids."""
        operand_kind = self.grammar.operand_kind(kind)
        if operand_kind.category == "ValueEnum" and len(names) != 1:
            raise SpirvBuildError(f"{kind} is a value enum: give exactly one name, got {names!r}")
        enumerants = [operand_kind.enumerant(name) for name in names]
        self._requirements.extend(e.availability for e in enumerants)
        self._requirements.extend(scope_requirements(kind, names, self.memory_model))
        return self.constant(self.type_int(32, False), sum({e.value for e in enumerants}))

    def spec_constant(self, type_id: Id, default: Scalar, spec_id: int, *, name: str | None = None) -> Id:
        """A specialization constant with its SpecId; never deduplicated, each one is set on its own."""
        if isinstance(default, bool):
            opname, operands = ("OpSpecConstantTrue" if default else "OpSpecConstantFalse"), (type_id,)
        else:
            opname, operands = "OpSpecConstant", (type_id, default)
        constant = self._declare(opname, operands, name=name)
        self.decorate(constant, "SpecId", spec_id)
        return constant

    def spec_constant_op(self, type_id: Id, opname: str, *operands) -> Id:
        """OpSpecConstantOp: `opname` applied to (spec) constants when the pipeline is specialized."""
        return self._unique_constant(("OpSpecConstantOp", opname, *operands), type_id)

    def _composite_from_values(self, type_id: Id, values: Sequence) -> Id:
        info = self.type_info(type_id)
        member_types = COMPOSITE_MEMBERS[info.opname](self, info.operands)
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) != len(member_types):
            raise SpirvBuildError(f"a {info.opname} constant needs a sequence of {len(member_types)} values, "
                                  f"got {values!r}")
        constituents = [v if isinstance(v, Id) else self.constant(t, v) for t, v in zip(member_types, values)]
        return self.constant_composite(type_id, constituents)

    def _unique_constant(self, opname_and_operands: tuple, type_id: Id, key: tuple | None = None) -> Id:
        opname, *operands = opname_and_operands
        key = key or (opname, type_id, *operands)
        if key not in self._constants:
            self._constants[key] = self._declare(opname, (type_id, *operands))
        return self._constants[key]
