"""Symbolic ids and encoded instructions: what the builder holds until the module is assembled and ids numbered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from coopnn.shaders.spirv.grammar import Availability


class Id:
    """A result id without a number yet; ids are numbered in order of first appearance when the module is assembled,
    so instructions can be deduplicated and sections reordered freely while building. Compared by identity."""

    __slots__ = ("hint",)

    def __init__(self, hint: str | None = None):
        self.hint = hint

    def __repr__(self) -> str:
        return f"Id({self.hint!r})" if self.hint else f"Id(@{id(self):x})"


Word = int | Id


@dataclass(frozen=True, eq=False)
class Instruction:
    """One instruction, operands already checked against the grammar and encoded: each operand word is either a
    32-bit literal word or an Id still to be numbered. `requirements` lists what its opcode and enumerants need."""

    opname: str
    opcode: int
    operands: tuple[Word, ...]
    result: Id | None = None
    result_type: Id | None = None
    requirements: tuple[Availability, ...] = ()

    def ids(self) -> Iterator[Id]:
        return (w for w in self.operands if isinstance(w, Id))
