"""The decorator the project's tables of functions are filled with: kernel lowerings, activation expansions and
derivatives, loss kernels, targets. `name = registrar(TABLE)`, then `@name(key, ...)` stores the function under each
key and returns it unchanged."""

from __future__ import annotations

from typing import Callable, Hashable, MutableMapping, TypeVar

F = TypeVar("F", bound=Callable)


def registrar(table: MutableMapping) -> Callable[..., Callable[[F], F]]:
    def under(*keys: Hashable) -> Callable[[F], F]:
        def register(fn: F) -> F:
            for key in keys:
                table[key] = fn
            return fn

        return register

    return under
