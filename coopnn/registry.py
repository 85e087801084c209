"""The decorator the project's tables of functions are filled with: kernel lowerings, activation expansions and
derivatives, loss kernels, targets. `name = registrar(TABLE)`, then `@name(key, ...)` stores the function under each
key and returns it unchanged. `package_modules` imports the modules of a family's package (one module a member, found
by the package, no list to edit); `package_tables` gathers the tables they each define."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Callable, Collection, Hashable, Iterator, MutableMapping, TypeVar

F = TypeVar("F", bound=Callable)


def registrar(table: MutableMapping) -> Callable[..., Callable[[F], F]]:
    def under(*keys: Hashable) -> Callable[[F], F]:
        def register(fn: F) -> F:
            for key in keys:
                table[key] = fn
            return fn

        return register

    return under


def package_modules(package: str) -> Iterator[ModuleType]:
    """Every module of `package` (a dotted name), imported, in the order the package's folder lists them."""
    for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
        yield importlib.import_module(f"{package}.{module.name}")


def package_tables(package: str, attribute: str, clash: Callable[[str, Collection], str]) -> dict:
    """The union of the `attribute` tables of the modules of `package` (a dotted name), a module without one adding
    nothing; ValueError with `clash(module, keys)` where a module defines keys an earlier one did."""
    found: dict = {}
    for module in package_modules(package):
        table = getattr(module, attribute, {})
        twice = set(found) & set(table)
        if twice:
            raise ValueError(clash(module.__name__.rpartition(".")[2], twice))
        found.update(table)
    return found
