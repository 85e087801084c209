"""The registry of training backends: a backend prepares a graph for training as a `TrainingSession`.

A session owns the fp32 master weights, the optimizer state and whatever the backend needs to run forward and
backward passes; the `Trainer` only moves batches and state in and out. The numpy backend is the first and the
oracle. A GPU backend (cooperative-vector or portable training kernels) plugs in by registering here under the name
of the inference backend it trains for, keeping `Optimizer.state_dict()` and the loss's `options()` as its
interface, so checkpoints and loss curves mean the same on every backend.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

import numpy as np

from coopnn.errors import BackendUnavailableError
from coopnn.graph.ir import Graph
from coopnn.train.losses import Loss
from coopnn.train.optim import Optimizer


class TrainingSession(Protocol):
    def step(self, feeds: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray]) -> float:
        """Forward, loss, backward and one optimizer update on one batch; returns the batch's loss before it."""

    def loss(self, feeds: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray]) -> float:
        """The mean loss of one batch with the current parameters."""

    def parameters(self) -> dict[str, np.ndarray]:
        """Copies of the current fp32 master weights by stable parameter name."""

    def load_parameters(self, values: Mapping[str, np.ndarray]) -> None: ...

    def optimizer_state(self) -> dict[str, Any]:
        """The optimizer's `state_dict()` as of now."""

    def load_optimizer_state(self, state: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


class TrainingBackend(Protocol):
    name: str

    def prepare(self, graph: Graph, loss: Loss, optimizer: Optimizer, *, device: str | int | None) -> TrainingSession:
        """A session training `graph` (CompileError naming the node when it cannot be trained)."""


_REGISTRY: dict[str, TrainingBackend] = {}


def register(backend: TrainingBackend) -> TrainingBackend:
    if backend.name in _REGISTRY:
        raise ValueError(f"training backend {backend.name!r} registered twice")
    _REGISTRY[backend.name] = backend
    return backend


def _load_builtin() -> None:
    # Listed explicitly so that a backend can't vanish because an import was forgotten.
    if _REGISTRY:
        return
    from coopnn.train.gpu.coopvec_session import CoopvecTrainingBackend
    from coopnn.train.gpu.portable_session import PortableTrainingBackend
    from coopnn.train.numpy_backend import NumpyTrainingBackend

    register(NumpyTrainingBackend())
    register(PortableTrainingBackend())
    register(CoopvecTrainingBackend())


def training_backends() -> list[str]:
    """The names of the backends that can train."""
    _load_builtin()
    return list(_REGISTRY)


def get(name: str) -> TrainingBackend:
    """The training backend `name`; BackendUnavailableError saying which backends train when it has none."""
    trains = training_backends()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise BackendUnavailableError(
            f"backend {name!r} cannot train; backends that train: {', '.join(trains)} (pass backend={trains[0]!r} "
            "to the Trainer to train there while the model keeps running on its own backend)"
        ) from None
