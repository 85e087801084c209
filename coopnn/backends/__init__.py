"""The one registry of backends: every folder below this package is a backend that registers one record
(`coopnn.backends.base.Backend`) when imported.

`backend="auto"` takes the highest-priority backend that is available and supports the model; the choice and the
reasons the faster ones were passed over are recorded, never decided silently. Each backend examines the graph once,
and what it lowered is kept for `prepare`. A weight format reaches a backend only when it is one of the backend's
`formats`, checked here (`examine`, `target_format`) and nowhere else.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Mapping

from coopnn.backends.base import Backend, Examined, Executable, TrainingSession
from coopnn.errors import BackendUnavailableError, CompileError
from coopnn.graph.ir import Graph
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.format import WeightFormat


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
    if backend.device_features:
        from coopnn.runtime.vk.shared import want

        want(backend.device_features)
    return backend


def _load_builtin() -> None:
    # Every sub-package is a backend: adding a folder adds a backend, and none can be left out of a list. (A folder
    # imported directly has registered already; importing it again is a no-op.)
    for found in pkgutil.iter_modules(__path__):
        if found.ispkg:
            importlib.import_module(f"{__name__}.{found.name}")


def all_backends() -> list[Backend]:
    _load_builtin()
    return sorted(_REGISTRY.values(), key=lambda b: -b.priority)


def names() -> list[str]:
    """The backend names, the preferred first."""
    return [b.name for b in all_backends()]


def get(name: str) -> Backend:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise BackendUnavailableError(f"unknown backend {name!r}; known backends: auto, {', '.join(names())}") from None


def statuses() -> list[BackendStatus]:
    out = []
    for b in all_backends():
        reason = b.unavailable_reason()
        out.append(BackendStatus(b.name, reason is None, reason or "", b.description))
    return out


def training_backends() -> list[str]:
    """The names of the backends that can train, the numpy oracle first."""
    return [b.name for b in reversed(all_backends()) if b.trains]


def training_backend(name: str) -> Backend:
    """The backend `name` when it trains; BackendUnavailableError saying which backends train when it does not."""
    _load_builtin()
    backend = _REGISTRY.get(name)
    if backend is None or not backend.trains:
        trains = training_backends()
        raise BackendUnavailableError(
            f"backend {name!r} cannot train; backends that train: {', '.join(trains)} (pass backend={trains[0]!r} "
            "to the Trainer to train there while the model keeps running on its own backend)")
    return backend


def target_names() -> list[str]:
    """The shader targets, one per backend that compiles kernels."""
    return sorted(b.target.name for b in all_backends() if b.target is not None)


def _compiling(name: str) -> Backend:
    _load_builtin()
    backend = _REGISTRY.get(name)
    if backend is None or backend.target is None:
        raise CompileError(f"unknown target {name!r}; targets: {', '.join(target_names())}")
    return backend


def target(name: str):
    """The shader target `name` (CompileError listing the targets when there is none)."""
    return _compiling(name).target


def _refusal(backend: Backend, what: str, weights: WeightFormat) -> str | None:
    """None when `backend` accepts `weights`, else what it stores instead, its `what` ("target", "backend") named."""
    if weights in backend.formats:
        return None
    return (f"the {backend.name} {what} stores weights as {' or '.join(f.name for f in backend.formats)}, not "
            f"{weights.name!r} (pass weights={backend.formats[0].name!r})")


def target_format(name: str, weights: str | WeightFormat | None) -> WeightFormat:
    """The weight format target `name` compiles with: `weights` resolved, or the backend's first format for None
    (CompileError when the backend does not accept it)."""
    backend = _compiling(name)
    fmt = backend.formats[0] if weights is None else weight_format(weights)
    why = _refusal(backend, "target", fmt)
    if why:
        raise CompileError(why)
    return fmt


def examine(backend: Backend, graph: Graph, weights: WeightFormat, device: str | int | None) -> Examined:
    """`backend.examine`, once the weight format is one the backend accepts."""
    why = _refusal(backend, "backend", weights)
    return Examined(why) if why else backend.examine(graph, weights, device)


def check_device(device: str | int | None) -> None:
    """BackendUnavailableError listing the devices when a device is asked for (`device`, or COOPNN_DEVICE) and none
    matches; nothing when none is asked for."""
    from coopnn.runtime.vk.selection import device_requested  # here: importing coopnn must not load Vulkan

    if device_requested(device):
        from coopnn.runtime.vk.shared import chosen_device

        chosen_device(device)


@dataclass(frozen=True)
class Choice:
    backend: Backend
    reason: str  # why this backend: requested, or what auto passed over
    lowered: Any = None  # what the backend lowered while examining the graph, handed to its `prepare`


def auto_answer(backend: Backend, graph: Graph, weights: WeightFormat, device: str | int | None,
                examined: Examined | None = None) -> tuple[Examined, str | None]:
    """What `backend="auto"` finds of `backend` for `graph` with `weights`: the backend's answer (`examined`, where
    it already gave one), and why auto passes it over (None: auto may take it)."""
    why = backend.unavailable_reason()
    answer = Examined(why) if why else examined or examine(backend, graph, weights, device)
    return answer, answer.reason or backend.auto_skip_reason(device, answer.lowered, weights)


def choose(name: str, graph: Graph, weights: WeightFormat, device: str | int | None,
           examined: Mapping[str, Examined] | None = None) -> Choice:
    """Pick the backend for `graph`: the named one (raising when it can't run) or, for "auto", the best that can.
    A device asked for (`device`, or COOPNN_DEVICE) that matches none is a BackendUnavailableError whatever the
    backend, numpy included: never a quiet fall-back to numpy, nor a device ignored. `examined` holds answers some
    backends already gave for this graph and `weights`, by name."""
    examined = dict(examined or {})
    backend = None if name == "auto" else get(name)
    check_device(device)
    if backend is not None:
        why = backend.unavailable_reason()
        if why:
            raise BackendUnavailableError(f"backend {name!r} is unavailable: {why}")
        answer = examined.get(name) or examine(backend, graph, weights, device)
        if answer.reason:
            raise CompileError(f"backend {name!r} cannot run model {graph.name!r}: {answer.reason}")
        return Choice(backend, "requested", answer.lowered)
    passed_over = []
    for backend in all_backends():
        answer, why = auto_answer(backend, graph, weights, device, examined.get(backend.name))
        if why is None:
            reason = "auto: fastest available" if not passed_over else "auto: " + "; ".join(passed_over)
            return Choice(backend, reason, answer.lowered)
        passed_over.append(f"{backend.name} skipped ({why})")
    raise BackendUnavailableError("no backend can run this model: " + "; ".join(passed_over))


__all__ = ["Backend", "BackendStatus", "Choice", "Examined", "Executable", "TrainingSession", "all_backends",
           "auto_answer", "check_device", "choose", "examine", "get", "register", "statuses", "target",
           "target_format", "target_names", "training_backend", "training_backends"]
