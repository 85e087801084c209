"""What a backend is: the record each backend folder registers, and what its inference and training sessions offer.

A backend says what it needs of a device, which weight formats it accepts (`formats`: the registry checks every request
against them, so `examine`, `prepare` and `refresh` only ever get one of them) and which shader target compiles its
kernels (None for numpy), examines a graph once (lowering it where it compiles kernels), and prepares the result for
inference (`Executable`) and for training (`TrainingSession`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from coopnn.errors import InputError
from coopnn.graph.ir import Graph
from coopnn.layouts.formats.format import WeightFormat


class Executable(Protocol):
    """A graph prepared by a backend: runs feeds (float arrays of any dtype and strides) keyed by input name,
    returns outputs keyed by name, written into the arrays of `out` where given (checked by `Model.run`). Safe to
    call from several threads at once."""

    def run(self, feeds: Mapping[str, np.ndarray],
            out: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]: ...

    def close(self) -> None: ...


class TrainingSession(Protocol):
    """A graph prepared for training: it owns the fp32 master weights, the optimizer state and whatever the backend
    needs to run forward and backward passes; the `Trainer` only moves batches and state in and out, keeping
    `Optimizer.state_dict()` and the loss's `options()` as the interface so checkpoints and loss curves mean the same
    on every backend."""

    def step(self, feeds: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray]) -> float:
        """Forward, loss, backward and one optimizer update on one batch; returns the batch's loss before it."""

    def upload_data(self, feeds: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray]) -> Any:
        """A whole data set where the session trains (`coopnn.train.gpu.resident.ResidentData` on a device,
        `coopnn.train.host_data.HostData` on the host): `rows` and `shards`, `select(shard)` and `close()`."""

    def run_steps(self, data: Any, first_step: int, steps: int, batch_size: int, seed: int,
                  on_losses: Callable[[np.ndarray], None] | None = None) -> np.ndarray:
        """`steps` steps on the batches the sampler of `coopnn.shaders.targets.sampler` draws from `data` for
        steps `first_step`.. of `seed` (the whole data each step when `batch_size` is no smaller); their losses, also
        handed to `on_losses` in order, in pieces, as they are known (the parameters are those of the last step only
        once the call returns). Interrupted, it leaves `steps_run` at the steps that ran to their end."""

    steps_run: int
    """Steps of the last `run_steps` call that ran to their end: all of them once it returned."""

    def loss(self, feeds: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray]) -> float:
        """The mean loss of one batch with the current parameters."""

    def parameters(self) -> dict[str, np.ndarray]:
        """Copies of the current fp32 master weights by stable parameter name."""

    def load_parameters(self, values: Mapping[str, np.ndarray]) -> None: ...

    def optimizer_state(self) -> dict[str, Any]:
        """The optimizer's `state_dict()` as of now."""

    def load_optimizer_state(self, state: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Examined:
    """A backend's answer for one graph: why it cannot run it (None when it can), and the graph lowered to a kernel
    program where the backend compiles kernels, kept so that preparing does not lower it again."""

    reason: str | None
    lowered: Any = None


class Backend(Protocol):
    name: str
    priority: int  # auto prefers higher
    description: str
    target: Any  # the shader target compiling the backend's kernels (`coopnn.shaders.targets.base.Target`), or None
    formats: tuple[WeightFormat, ...]  # the weight formats it accepts, the one `weights="auto"` takes on it first
    trains: bool  # whether `prepare_training` works
    # the keyword options `prepare_training` takes (`coopnn.Trainer(model, **options)` passes them), by name, each
    # with the values it accepts
    training_options: Mapping[str, tuple[str, ...]]
    # Vulkan features its kernels (inference and training) may use: the device's shared context enables those the
    # device has (`coopnn.runtime.vk.shared`), so the model and its trainer share one context.
    device_features: frozenset[str]

    def unavailable_reason(self) -> str | None:
        """None when the backend can run on this machine, otherwise what is missing and how to get it."""

    def examine(self, graph: Graph, weights: WeightFormat, device: str | int | None) -> Examined:
        """Whether the backend can run `graph` with `weights` on `device`, with what it lowered on the way."""

    def auto_skip_reason(self, device: str | int | None, lowered: Any, weights: WeightFormat) -> str | None:
        """None when `backend="auto"` may take this backend on `device` for the graph it lowered to `lowered`
        (`examine` found it can run it) with `weights`; otherwise why a slower-ranked one is better there (it can
        still be asked for by name)."""

    def prepare(self, graph: Graph, lowered: Any, *, weights: WeightFormat, device: str | int | None) -> Executable:
        """An executable for `graph` with its weights stored in format `weights`, from what `examine` lowered."""

    def refresh(self, executable: Executable, graph: Graph, *, weights: WeightFormat) -> bool:
        """Make `executable` (prepared here for a graph of the same structure) run `graph`'s constants; False when it
        cannot, and the graph must be prepared anew."""

    def take_trained(self, executable: Executable, session: TrainingSession) -> bool:
        """Make `executable` run the parameters `session` (training the same graph) holds now, without a host round
        trip; False when it cannot, and the model takes them through the host (`refresh` or `prepare`)."""

    def prepare_training(self, graph: Graph, loss, optimizer, *, device: str | int | None,
                         **options: str) -> TrainingSession:
        """A session training `graph` (CompileError naming the node when it cannot be trained); `options` are some
        of `training_options`, checked by `check_training_options`."""


def check_training_options(backend: Backend, options: Mapping[str, Any]) -> None:
    """InputError naming what `backend` takes unless every option is one it takes, with a value it accepts."""
    accepted = backend.training_options
    for name, value in options.items():
        if name not in accepted:
            takes = ", ".join(f"{k}={list(v)}" for k, v in accepted.items()) or "no options"
            raise InputError(f"training on {backend.name!r} takes {takes}, not {name}={value!r}")
        if not isinstance(value, str) or value not in accepted[name]:
            raise InputError(f"training on {backend.name!r}: {name} must be one of {list(accepted[name])}, not "
                             f"{value!r}")
