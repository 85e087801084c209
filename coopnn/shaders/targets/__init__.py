"""Targets: one module per target turns a kernel program into a `Binary` (SPIR-V, bindings, packed weights)."""

from __future__ import annotations

from coopnn.errors import CompileError
from coopnn.shaders.targets.base import TARGETS, Binary, Binding, PushConstant, Target


def _load_builtin() -> None:
    # Listed explicitly so that a target can't vanish because an import was forgotten.
    from coopnn.shaders.targets import coopvec, portable  # noqa: F401


def target(name: str) -> Target:
    _load_builtin()
    if name not in TARGETS:
        raise CompileError(f"unknown target {name!r}; targets: {', '.join(sorted(TARGETS))}")
    return TARGETS[name]()


def target_names() -> list[str]:
    _load_builtin()
    return sorted(TARGETS)


__all__ = ["Binary", "Binding", "PushConstant", "Target", "target", "target_names"]
