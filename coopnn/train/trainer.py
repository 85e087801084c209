"""The Trainer: trains a Model's parameters on a training backend and keeps the model running the latest weights.

It checks the data, draws the batches (a seeded generator, so a seed and the data fix the loss curve), drives the
backend's `TrainingSession`, shows progress, and saves and restores checkpoints. Everything numerical happens in the
session; the Trainer is the same whichever backend trains.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

import numpy as np

from coopnn.errors import InputError, ModelFormatError
from coopnn.model import Model
from coopnn.progress import Progress
from coopnn import backends
from coopnn.train.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from coopnn.train.losses import Loss, get_loss
from coopnn.train.optim import Adam, Optimizer
from coopnn.graph.parameter_file import check_complete

EVALUATE_BATCH = 1 << 16  # samples per forward pass in evaluate(): bounds memory whatever the data set's size


class Trainer:
    """Trains `model` with `loss` (a name from `coopnn.train.losses.LOSSES` or a Loss) and `optimizer` (Adam(lr=1e-3)
    by default). `backend` is the training backend, by default the model's own; `seed` fixes the batches `fit` draws.

    The trainer owns the weights from its creation on: it starts from the model's parameters, and after every step
    the model runs the trainer's (whatever the model's weight format, training keeps fp32 master weights; the model
    rounds them to its format when it runs).
    """

    def __init__(self, model: Model, loss: str | Loss = "l2", optimizer: Optimizer | None = None, *,
                 backend: str | None = None, seed: int = 0):
        self.model = model
        self.loss = get_loss(loss)
        self.optimizer = Adam() if optimizer is None else optimizer
        self.backend = model.backend if backend is None else backend
        self.session = backends.training_backend(self.backend).prepare_training(model.graph, self.loss, self.optimizer,
                                                                                device=model.device)
        self.rng = np.random.default_rng(seed)
        self.steps = 0

    def step(self, x: Any, y: Any) -> float:
        """One optimizer step on the batch (x, y); returns the batch's loss before the step."""
        feeds, targets = self._data(x, y)
        return self._step(feeds, targets)

    def fit(self, x: Any, y: Any, *, steps: int, batch_size: int = 4096, progress: bool = True,
            on_step: Callable[[int, float], str | None] | None = None) -> np.ndarray:
        """`steps` optimizer steps on batches of `batch_size` samples drawn at random from (x, y) (the whole data
        every step when it is no larger). `on_step(step, loss)` runs after each step and may return text for the
        progress bar. Returns the loss of every step."""
        if steps < 0 or batch_size < 1:
            raise InputError(f"fit needs steps >= 0 and batch_size >= 1, not {steps} and {batch_size}")
        feeds, targets = self._data(x, y)
        count = _count(targets)
        losses = np.empty(steps, np.float64)
        bar = Progress(steps, label="fit") if progress else None
        try:
            for i in range(steps):
                rows = self.rng.integers(0, count, batch_size) if batch_size < count else slice(None)
                losses[i] = loss = self._step({k: v[rows] for k, v in feeds.items()},
                                              {k: v[rows] for k, v in targets.items()})
                detail = on_step(self.steps, loss) if on_step is not None else None
                if bar is not None:
                    bar.advance(detail=f"loss {loss:.4g}" + (f" {detail}" if detail else ""))
        finally:
            if bar is not None:
                bar.close()
        return losses

    def evaluate(self, x: Any, y: Any, batch_size: int = EVALUATE_BATCH) -> float:
        """The mean loss over all of (x, y) with the current parameters (no step is taken)."""
        feeds, targets = self._data(x, y)
        count, total = _count(targets), 0.0
        for start in range(0, count, batch_size):
            part = slice(start, start + batch_size)
            batch = {k: v[part] for k, v in targets.items()}
            total += self.session.loss({k: v[part] for k, v in feeds.items()}, batch) * _count(batch)
        return total / count

    def save_checkpoint(self, path: str | os.PathLike) -> None:
        """Write the parameters, the optimizer state and the trainer's step count and batch sampler state."""
        trainer = {"steps": self.steps, "rng": self.rng.bit_generator.state, "backend": self.backend,
                   "loss": {"name": self.loss.name, **self.loss.options()}}
        write_checkpoint(path, Checkpoint(self.session.parameters(), self.session.optimizer_state(), trainer))

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        """Restore what `save_checkpoint` wrote (optimizer hyperparameters included); training then continues as
        it would have from there. ModelFormatError when the file does not fit this model or optimizer."""
        checkpoint = read_checkpoint(path)
        check_complete(self.model.graph, checkpoint.parameters, f"checkpoint file {os.fspath(path)!r}")
        try:
            steps, rng_state = int(checkpoint.trainer["steps"]), checkpoint.trainer["rng"]
            rng = np.random.default_rng()
            rng.bit_generator.state = rng_state
        except (KeyError, TypeError, ValueError) as e:
            raise ModelFormatError(f"checkpoint file {os.fspath(path)!r} has a malformed trainer state: {e!r}") from e
        self.session.load_optimizer_state(checkpoint.optimizer)
        self.session.load_parameters(checkpoint.parameters)
        self.steps, self.rng = steps, rng
        self.model.take_trained(self.session)

    def _step(self, feeds: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray]) -> float:
        loss = self.session.step(feeds, targets)
        self.steps += 1
        self.model.take_trained(self.session)
        return loss

    def _data(self, x: Any, y: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Inputs checked by the model, and float32 targets keyed by output name with matching batch sizes."""
        feeds = {name: np.ascontiguousarray(array, np.float32) for name, array in self.model.feeds(x).items()}
        outputs = {t.name: t for t in self.model.outputs}
        if isinstance(y, Mapping):
            unknown = sorted(set(y) - set(outputs))
            if unknown or not y:
                raise InputError(f"targets {unknown or '{}'}: give targets for some of the outputs {sorted(outputs)}")
            targets = dict(y)
        elif len(outputs) == 1:
            targets = {next(iter(outputs)): y}
        else:
            raise InputError(f"the model has several outputs ({', '.join(outputs)}): give targets as a dict")
        batch = _count(feeds)
        checked = {}
        for name, target in targets.items():
            info = outputs[name]
            if info.dtype == np.bool_:
                raise InputError(f"output {name!r} is boolean; only float outputs can be trained")
            array = np.asarray(target)
            if array.dtype.kind not in "fiu":
                raise InputError(f"targets for {name!r} have dtype {array.dtype}; give numbers")
            if array.shape != (batch,) + tuple(info.shape[1:]):
                want = [batch, *info.shape[1:]]
                raise InputError(f"targets for {name!r} have shape {list(array.shape)}; expected {want}")
            checked[name] = np.ascontiguousarray(array, dtype=np.float32)
        if batch == 0:
            raise InputError("the data holds no samples")
        return feeds, checked


def _count(arrays: Mapping[str, np.ndarray]) -> int:
    return next(iter(arrays.values())).shape[0]
