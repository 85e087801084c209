"""The checker's frame: the registry from instruction class to its rule, the scopes values are defined in, the kind
of region being checked (collective, SPMD), and how a rule reports a diagnostic.

A rule takes the context and the instruction and returns the types of the values the instruction defines (None for a
type it could not work out, so one mistake gives one diagnostic, not a cascade). Rules live in check_scalar.py,
check_memory.py, check_control.py and check_coopmatrix.py; checker.py imports them by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from coopnn.tl import ast
from coopnn.tl.errors import Diagnostic
from coopnn.tl.types import INDEX, MemrefType, ScalarType, Type

Rule = Callable[["Context", ast.Inst], tuple]
RULES: dict[type, Rule] = {}
SPMD_ONLY: set[type] = set()
COLLECTIVE_ONLY: set[type] = set()


def rule(*classes: type, spmd: bool | None = None):
    """Registers the rule for `classes`; spmd=True: SPMD instructions, False: collective instructions, None: mixed."""

    def register(function: Rule) -> Rule:
        for cls in classes:
            RULES[cls] = function
            if spmd is True:
                SPMD_ONLY.add(cls)
            elif spmd is False:
                COLLECTIVE_ONLY.add(cls)
        return function

    return register


class Unknown(Exception):
    """Raised by a rule when an operand's type is unknown (already reported): the instruction's results get None."""


@dataclass
class Context:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    scopes: list[dict[str, Type]] = field(default_factory=lambda: [{}])
    constants: dict[str, object] = field(default_factory=dict)
    spmd: bool = False
    subgroup_size: int | None = None
    check_region: Callable | None = None

    def error(self, where, message: str) -> None:
        span = where.span if hasattr(where, "span") else where
        self.diagnostics.append(Diagnostic(span, message))

    def fail(self, where, message: str):
        """Reports and stops the rule (its results get no type)."""
        self.error(where, message)
        raise Unknown

    def type_of(self, value: ast.Value) -> Type:
        for scope in reversed(self.scopes):
            if value.name in scope:
                found = scope[value.name]
                if found is None:
                    raise Unknown
                return found
        self.fail(value, f"Undefined value %{value.name}")

    def define(self, value: ast.Value, value_type: Type | None) -> None:
        if any(value.name in scope for scope in self.scopes):
            self.error(value, f"Value %{value.name} is defined twice (values are assigned once)")
        self.scopes[-1][value.name] = value_type

    def scalar(self, value: ast.Value, what: str = "Operand") -> ScalarType:
        found = self.type_of(value)
        if not isinstance(found, ScalarType):
            self.fail(value, f"{what} must have a scalar type, got {found}")
        return found

    def index(self, value: ast.Value, what: str = "Index") -> None:
        found = self.type_of(value)
        if found != INDEX:
            self.fail(value, f"{what} must have index type, got {found}")

    def memref(self, value: ast.Value, what: str = "Operand") -> MemrefType:
        found = self.type_of(value)
        if not isinstance(found, MemrefType):
            self.fail(value, f"{what} must have memref type, got {found}")
        return found

    def same(self, where, got, wanted, message: str = "Operand type must match return type") -> None:
        if got != wanted:
            self.fail(where, f"{message} ({got} vs {wanted})")
