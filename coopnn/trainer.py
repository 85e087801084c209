"""The Trainer: trains a Model's parameters on a training backend and keeps the model running the latest weights.

It checks the data, hands it to the backend's `TrainingSession` once per `fit` (on a GPU backend it is uploaded and
every batch is drawn there by the seeded sampler of `coopnn.shaders.targets.sampler`, so a seed and the data fix
the loss curve on every backend), runs the steps in runs read back together, shows progress, and saves and restores
checkpoints. Everything numerical happens in the session; the Trainer is the same whichever backend trains.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Mapping

import numpy as np

from coopnn.errors import InputError, ModelFormatError, TrainerClosedError
from coopnn.interop import tensors
from coopnn.interop.device_arrays import DeviceArray
from coopnn.model import Model
from coopnn.progress import Progress
from coopnn.runtime.copies import sums_finite
from coopnn import backends
from coopnn.backends.base import check_training_options
from coopnn.train.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from coopnn.train.losses import Loss, get_loss
from coopnn.train.optim import Optimizer, get_optimizer
from coopnn.graph.parameter_file import check_complete

EVALUATE_BATCH = 1 << 16  # samples per forward pass in evaluate(): bounds memory whatever the data set's size
# `fit` with `on_step` but without `read_every` reads the losses back about this often (seconds of wall clock per run
# of steps), as often as a progress bar on a terminal redraws: the GPU runs the steps in between with no host in the
# way.
READ_SECONDS = 0.1
FIRST_RUN = 4  # steps in the first run, before one has been timed
FINITE_CHECK_ROWS = 1 << 16  # samples of host data tested for NaN and infinity at a time


class Trainer:
    """Trains `model` with `loss` (a name from `coopnn.train.losses.LOSSES` or a Loss) and `optimizer` (a name from
    `coopnn.train.optim.OPTIMIZERS` with its default settings, or an Optimizer; Adam(lr=1e-3) by default). `backend`
    is the training backend, by default the model's own; `seed` fixes the batches `fit` draws.
    `options` choose the training backend's kernels (its `training_options`; coopvec: `gradients` = "auto",
    "coopmat", "coopvec", "fused", "outer_product" or "outer_product_reduced", `step` = "auto", "coopvec" or "tiled",
    `table_atomics` = "auto", "float32" or "float16_pairs": how a trained grid's gradient is added).

    The trainer owns the weights from its creation on: it starts from the model's parameters, and after every step
    the model runs the trainer's (whatever the model's weight format, training keeps fp32 master weights; the model
    rounds them to its format when it runs). `close()`, or leaving a `with` block, frees the training session's
    memory; the model keeps the trained weights.
    """

    def __init__(self, model: Model, loss: str | Loss = "l2", optimizer: str | Optimizer | None = None, *,
                 backend: str | None = None, seed: int = 0, **options: str):
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 1 << 32:
            raise InputError(f"seed must be a whole number from 0 to 2^32 - 1 (the batch sampler's), not {seed!r}")
        self.model = model
        self.loss = get_loss(loss)
        self.optimizer = get_optimizer(optimizer)
        self.backend = model.backend if backend is None else backend
        training = backends.training_backend(self.backend)
        check_training_options(training, options)
        self._session = training.prepare_training(model.graph, self.loss, self.optimizer, device=model.device,
                                                  **options)
        self.seed = seed
        self.steps = 0

    @property
    def session(self) -> backends.TrainingSession:
        """The training backend's session: weights, optimizer state and the kernels that update them."""
        if self._session is None:
            raise TrainerClosedError("this trainer is closed; make a new Trainer to train the model again")
        return self._session

    def close(self) -> None:
        """Free the session's memory (weights, optimizer state, tape, and on a GPU the last fit's data set) once the
        model holds the trained weights; the model keeps running them. Later calls raise TrainerClosedError; closing
        again does nothing."""
        session, self._session = self._session, None
        if session is not None:
            try:
                self.model.settle_training(session)
            finally:
                session.close()

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def step(self, x: Any, y: Any) -> float:
        """One optimizer step on the batch (x, y); returns the batch's loss before the step. A batch of coopnn device
        arrays stays on the GPU on the GPU backends: the step copies it there into its own inputs. So does a batch
        of CUDA arrays (PyTorch, CuPy) where the training device shares memory with CUDA (CUDA copies it into that
        memory first); elsewhere it goes through the host."""
        on_device = not _holds_cuda_arrays(x, y) or getattr(self.session, "steps_take_cuda_arrays", False)
        return self._step(*self._data(x, y, on_device=on_device))

    def fit(self, x: Any, y: Any, *, steps: int, batch_size: int = 4096, progress: bool = True,
            on_step: Callable[[int, float], str | None] | None = None,
            read_every: int | None = None) -> np.ndarray:
        """`steps` optimizer steps on batches of `batch_size` samples drawn at random, with replacement, from
        (x, y) (the whole data every step when it is no larger). Returns the loss of every step.

        The data is handed to the training backend once: a GPU backend uploads it and draws each batch on the device
        (the seeded sampler of `coopnn.shaders.targets.sampler`: batch number `trainer.steps` of seed `seed`), and
        runs steps back to back. Without `on_step` or `read_every` (and with data that fits the device whole) all
        the steps are one run: the GPU never waits for the host, and the losses come back in blocks as it finishes
        them, for the progress bar. Otherwise runs end every `read_every` steps (counted by `trainer.steps`), or about
        every `READ_SECONDS`, each reading its losses back: `on_step(step, loss)` is called for each step when its
        run is read, and may return text for the progress bar; the model then runs the weights of the run's last
        step (with `read_every`, steps that are multiples of it see their own weights). An interrupted fit (Ctrl-C)
        waits for the steps already on the GPU; the trainer counts every step that ran, and the model runs the
        weights of the last. A GPU session keeps the data set's buffers after `fit` returns (where they take at most
        a sixteenth of the device's memory), for the next fit on data of the same shapes, which fills them anew and
        runs the steps recorded for them; data of other shapes replaces them, and `close()` frees them."""
        for name, value, least in (("steps", steps, 0), ("batch_size", batch_size, 1), ("read_every", read_every, 1)):
            whole = not isinstance(value, bool) and isinstance(value, (int, np.integer))
            if (value is not None or name != "read_every") and not (whole and value >= least):
                raise InputError(f"fit needs {name} a whole number >= {least}, not {value!r}")
        feeds, targets = self._data(x, y, on_device=True)
        losses = np.empty(steps, np.float64)
        bar = Progress(steps, label="fit") if progress else None
        data = self.session.upload_data(feeds, targets)
        try:
            if on_step is None and read_every is None and len(data.shards) == 1:
                self._one_run(data, losses, batch_size, bar)
            else:
                self._runs(data, losses, batch_size, bar, on_step, read_every)
        finally:
            data.close()
            if bar is not None:
                bar.close()
        return losses

    def _one_run(self, data, losses: np.ndarray, batch_size: int, bar: Progress | None) -> None:
        """`fit`'s steps as one run: nothing needs the weights before its end."""
        def show(values: np.ndarray) -> None:
            if bar is not None:
                bar.advance(len(values), detail=f"loss {values[-1]:.4g}")

        if len(losses):
            losses[:] = self._run(data, len(losses), batch_size, show)
            self.steps += len(losses)

    def _run(self, data, steps: int, batch_size: int,
             on_losses: Callable[[np.ndarray], None] | None = None) -> np.ndarray:
        """A run of `steps` steps from the trainer's step count; the model runs the weights of its last step. An
        interrupted run (Ctrl-C) counts the steps that ran, whose weights the model runs too."""
        try:
            values = self.session.run_steps(data, self.steps, steps, batch_size, self.seed, on_losses=on_losses)
        except BaseException:
            self.steps += self.session.steps_run
            self.model.take_trained(self.session)
            raise
        self.model.take_trained(self.session)
        return values

    def _runs(self, data, losses: np.ndarray, batch_size: int, bar: Progress | None,
              on_step: Callable[[int, float], str | None] | None, read_every: int | None) -> None:
        """`fit`'s steps as runs of steps read back one by one, for `on_step` and `read_every`."""
        done, run, runs = 0, FIRST_RUN, 0
        while done < len(losses):
            if read_every is not None:
                run = read_every - self.steps % read_every
            count = min(run, len(losses) - done)
            data.select(runs)
            started = time.perf_counter()
            values = self._run(data, count, batch_size)
            elapsed = time.perf_counter() - started
            for loss in values:
                self.steps += 1
                losses[done] = loss
                done += 1
                detail = on_step(self.steps, float(loss)) if on_step is not None else None
                if bar is not None:
                    bar.advance(detail=f"loss {loss:.4g}" + (f" {detail}" if detail else ""))
            runs += 1
            run = max(1, min(4 * count, int(count * READ_SECONDS / max(elapsed, 1e-6))))

    def evaluate(self, x: Any, y: Any, batch_size: int = EVALUATE_BATCH) -> float:
        """The mean loss over all of (x, y) with the current parameters (no step is taken): not finite where a
        sample is not."""
        feeds, targets = self._data(x, y, for_steps=False)
        count, total = _count(targets), 0.0
        for start in range(0, count, batch_size):
            part = slice(start, start + batch_size)
            batch = {k: v[part] for k, v in targets.items()}
            total += self.session.loss({k: v[part] for k, v in feeds.items()}, batch) * _count(batch)
        return total / count

    def kernel_statistics(self) -> list:
        """What the device's driver made of each kernel of a training step (the step kernel, the weight-gradient
        kernels, the optimizer and the bookkeeping), as `Model.kernel_statistics` says; InputError where the session
        runs no Vulkan kernels (the numpy backend)."""
        from coopnn.runtime.kernel_statistics import kernel_statistics

        binaries = getattr(self.session, "binaries", None)
        if binaries is None:
            raise InputError(f"kernel statistics need a Vulkan backend; this trainer trains on {self.backend}")
        return kernel_statistics(binaries(), self.model.device)

    def save_checkpoint(self, path: str | os.PathLike) -> None:
        """Write the parameters, the optimizer state, the trainer's step count and sampler seed, and the session's
        loss scaling where it scales the loss (so that a resumed run continues as an uninterrupted one)."""
        trainer = {"steps": self.steps, "seed": self.seed, "backend": self.backend,
                   "loss": {"name": self.loss.name, **self.loss.options()}}
        if hasattr(self.session, "scaling_state"):
            trainer["loss_scaling"] = self.session.scaling_state()
        write_checkpoint(path, Checkpoint(self.session.parameters(), self.session.optimizer_state(), trainer))

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        """Restore what `save_checkpoint` wrote (optimizer hyperparameters included); training then continues as
        it would have from there. ModelFormatError when the file does not fit this model or optimizer."""
        checkpoint = read_checkpoint(path)
        check_complete(self.model.graph, checkpoint.parameters, f"checkpoint file {os.fspath(path)!r}")
        try:
            steps, seed = int(checkpoint.trainer["steps"]), int(checkpoint.trainer["seed"])
        except (KeyError, TypeError, ValueError) as e:
            raise ModelFormatError(f"checkpoint file {os.fspath(path)!r} has a malformed trainer state: {e!r}") from e
        if hasattr(self.session, "load_scaling_state") and "loss_scaling" in checkpoint.trainer:
            try:
                self.session.load_scaling_state(checkpoint.trainer["loss_scaling"])
            except (KeyError, TypeError, ValueError) as e:
                raise ModelFormatError(f"checkpoint file {os.fspath(path)!r} has a malformed loss-scaling state: "
                                       f"{e!r}") from e
        self.session.load_optimizer_state(checkpoint.optimizer)
        self.session.load_parameters(checkpoint.parameters)
        self.steps, self.seed = steps, seed
        self.model.take_trained(self.session)

    def _step(self, feeds: Mapping[str, Any], targets: Mapping[str, Any]) -> float:
        """One step on a batch on the host, or (GPU sessions) one partly or wholly in coopnn device arrays or CUDA
        arrays (`CudaInput`s), which the session copies on the device."""
        loss = self.session.step(feeds, targets)
        self.steps += 1
        self.model.take_trained(self.session)
        return loss

    def _data(self, x: Any, y: Any, on_device: bool = False,
              for_steps: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
        """Inputs checked by the model, and float32 targets keyed by output name with matching batch sizes. Arrays
        already on a GPU stay there when `on_device` and the session takes them: CUDA arrays (PyTorch, CuPy, ...) as
        `CudaInput`s (converted to float32 rows there by their framework), coopnn device arrays as they are;
        otherwise they are copied to the host. Data on the host for steps (`for_steps`) must be finite (InputError
        naming the first sample that is not); data left on a GPU is not read back to check."""
        keep_cuda = on_device and getattr(self.session, "takes_cuda_arrays", False)
        named = self.model.named_inputs(x)
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
        for name, info in outputs.items():
            if name in targets and info.dtype == np.bool_:
                raise InputError(f"output {name!r} is boolean; only float outputs can be trained")
        features = {t.name: tuple(t.shape[1:]) for t in self.model.inputs} | {
            name: tuple(info.shape[1:]) for name, info in outputs.items()}
        if keep_cuda and all(_on_gpu(value) for value in named.values()):
            feeds = {name: _kept_on_gpu(name, value, features[name]) for name, value in named.items()}
        else:
            feeds = {name: np.ascontiguousarray(array, np.float32) for name, array in self.model.feeds(
                {name: _to_host(name, value) for name, value in named.items()}).items()}
        batch = _count(feeds)
        checked = {}
        for name, target in targets.items():
            if keep_cuda and _on_gpu(target):
                checked[name] = _kept_on_gpu(name, target, features[name])
                rows = tensors.rows_of(checked[name])
                if rows != batch:
                    raise InputError(f"targets for {name!r} hold {rows} samples, the inputs {batch}")
                continue
            array = _to_host(name, target) if _on_gpu(target) else np.asarray(target)
            if array.dtype.kind not in "fiu":
                raise InputError(f"targets for {name!r} have dtype {array.dtype}; give numbers")
            if array.shape != (batch,) + features[name]:
                raise InputError(f"targets for {name!r} have shape {list(array.shape)}; expected "
                                 f"{[batch, *features[name]]}")
            checked[name] = np.ascontiguousarray(array, dtype=np.float32)
        if batch == 0:
            raise InputError("the data holds no samples")
        for what, arrays in (("input", feeds), ("targets for", checked)) if for_steps else ():
            for name, array in arrays.items():
                row = _first_non_finite(array) if isinstance(array, np.ndarray) else None
                if row is not None:
                    raise InputError(f"{what} {name!r} holds NaN or infinity (first in sample {row}): one such sample "
                                     f"makes every parameter NaN; drop or replace those samples")
        return feeds, checked


def _first_non_finite(array: np.ndarray) -> int | None:
    """The first sample (row) of `array` holding NaN or infinity, or None. The sums of its parts are not finite where
    a sample is not (or, rarely, where finite values overflow one), so only then are the samples tested, in chunks so
    that no mask of the whole data set is made: one pass over the data otherwise, on the copy threads
    (`copies.sums_finite`), as `Trainer.step` checks every batch."""
    rows = array.reshape(len(array), -1)
    if sums_finite(rows):
        return None
    for first in range(0, len(rows), FINITE_CHECK_ROWS):
        finite = np.isfinite(rows[first:first + FINITE_CHECK_ROWS]).all(axis=1)
        if not finite.all():
            return first + int(np.argmin(finite))
    return None


def _holds_cuda_arrays(*data: Any) -> bool:
    """Whether any of `data` (arrays, or mappings or sequences of them) is a CUDA array."""
    values = [v for d in data for v in (d.values() if isinstance(d, Mapping) else d if isinstance(d, (list, tuple))
                                        else (d,))]
    return any(tensors.is_cuda_array(v) for v in values)


def _on_gpu(value: Any) -> bool:
    return isinstance(value, DeviceArray) or tensors.is_cuda_array(value)


def _kept_on_gpu(name: str, value: Any, features: tuple[int, ...]) -> Any:
    """A GPU array checked against the feature shape: a `CudaInput` of float32 rows, or the device array."""
    if not isinstance(value, DeviceArray):
        return tensors.as_cuda_input(name, value, features, "f32")
    if value.shape[1:] != features or len(value.shape) != len(features) + 1:
        raise InputError(f"{name!r} has shape {list(value.shape)}; expected [batch, {', '.join(map(str, features))}]")
    return value


def _to_host(name: str, value: Any) -> Any:
    if isinstance(value, DeviceArray):
        return value.numpy()
    return tensors.to_host(name, value) if tensors.is_cuda_array(value) else value


def _count(arrays: Mapping[str, Any]) -> int:
    return tensors.rows_of(next(iter(arrays.values())))
