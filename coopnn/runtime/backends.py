"""The registry of backends: each one says whether it can run here, whether it can run a graph, and prepares it.

`backend="auto"` takes the highest-priority backend that is available and supports the model; the choice and the
reasons the faster ones were passed over are recorded, never decided silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol

import numpy as np

from coopnn.errors import BackendUnavailableError, CompileError
from coopnn.graph.ir import Graph


class Executable(Protocol):
    """A graph prepared by a backend: runs feeds (float arrays of any dtype and strides) keyed by input name,
    returns outputs keyed by name, written into the arrays of `out` where given (checked by `Model.run`). Safe to
    call from several threads at once."""

    def run(self, feeds: Mapping[str, np.ndarray],
            out: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]: ...

    def close(self) -> None: ...


class Backend(Protocol):
    name: str
    priority: int  # auto prefers higher
    description: str

    def unavailable_reason(self) -> str | None:
        """None when the backend can run on this machine, otherwise what is missing and how to get it."""

    def unsupported_reason(self, graph: Graph, weights: str, device: str | int | None) -> str | None:
        """None when the backend can run `graph` with `weights`, otherwise why not."""

    def auto_skip_reason(self, device: str | int | None) -> str | None:
        """None when `backend="auto"` may take this backend on `device`; otherwise why a slower-ranked one is better
        there (it can still be asked for by name)."""

    def prepare(self, graph: Graph, *, weights: str, device: str | int | None) -> Executable: ...

    def refresh(self, executable: Executable, graph: Graph, *, weights: str) -> bool:
        """Make `executable` (prepared here for a graph of the same structure) run `graph`'s constants; False when it
        cannot, and the graph must be prepared anew."""


@dataclass(frozen=True)
class BackendStatus:
    name: str
    available: bool
    reason: str  # why it is unavailable; empty when available
    description: str


_REGISTRY: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    if backend.name in _REGISTRY:
        raise ValueError(f"backend {backend.name!r} registered twice")
    _REGISTRY[backend.name] = backend
    return backend


def _load_builtin() -> None:
    # Listed explicitly so that a backend can't vanish because an import was forgotten.
    if _REGISTRY:
        return
    from coopnn.runtime.coopvec_backend import CoopvecBackend
    from coopnn.runtime.numpy_backend import NumpyBackend
    from coopnn.runtime.portable_backend import PortableBackend

    for backend in (NumpyBackend(), PortableBackend(), CoopvecBackend()):
        register(backend)


def all_backends() -> list[Backend]:
    _load_builtin()
    return sorted(_REGISTRY.values(), key=lambda b: -b.priority)


def get(name: str) -> Backend:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise BackendUnavailableError(
            f"unknown backend {name!r}; known backends: auto, {', '.join(b.name for b in all_backends())}"
        ) from None


def statuses() -> list[BackendStatus]:
    out = []
    for b in all_backends():
        reason = b.unavailable_reason()
        out.append(BackendStatus(b.name, reason is None, reason or "", b.description))
    return out


@dataclass(frozen=True)
class Choice:
    backend: Backend
    reason: str  # why this backend: requested, or what auto passed over


def choose(name: str, graph: Graph, weights: str, device: str | int | None) -> Choice:
    """Pick the backend for `graph`: the named one (raising when it can't run) or, for "auto", the best that can."""
    if name != "auto":
        backend = get(name)
        why = backend.unavailable_reason()
        if why:
            raise BackendUnavailableError(f"backend {name!r} is unavailable: {why}")
        why = backend.unsupported_reason(graph, weights, device)
        if why:
            raise CompileError(f"backend {name!r} cannot run model {graph.name!r}: {why}")
        return Choice(backend, "requested")
    passed_over = []
    for backend in all_backends():
        why = (backend.unavailable_reason() or backend.unsupported_reason(graph, weights, device)
               or backend.auto_skip_reason(device))
        if why is None:
            reason = "auto: fastest available" if not passed_over else "auto: " + "; ".join(passed_over)
            return Choice(backend, reason)
        passed_over.append(f"{backend.name} skipped ({why})")
    raise BackendUnavailableError("no backend can run this model: " + "; ".join(passed_over))
