"""The training benchmark: one optimizer step on a batch, coopnn's training backends against PyTorch.

Each runner takes whole steps (forward, loss, backward, optimizer update) of the L2 loss with Adam on the same model,
batch and random data, and reports the GPU time of a step (from its own clock: Vulkan timestamps around the step's
submission, CUDA events around PyTorch's step) and the host time of the call: coopnn's `Trainer.step` from numpy
arrays, from coopnn device arrays and from PyTorch CUDA tensors, PyTorch's from CUDA tensors. The PyTorch baseline is
what a PyTorch user would train with on that GPU: automatic mixed precision (fp16 autocast with a gradient scaler) and
the fused Adam. Before timing, every runner steps for `warmup_seconds` and then on until its step time settles
(`warm_up`), because a GPU runs work several times slower after idling and a machine just started runs the same
steps slower for a while even after a fixed warm-up (`docs/benchmarks.md`). The warm-up taken is in each result's
note.

With `fit_steps`, a runner that can also trains as a user's loop would: `fit_steps` steps on batches drawn from a
data set (four batches' worth of random samples), timed by the wall clock from the call to the last result on the
host, the data set's upload included: once from numpy arrays and once from PyTorch CUDA tensors. coopnn runs a whole
`Trainer.fit` without `on_step` or progress bar (the data checked and uploaded, the steps as one run, the weights
handed to the model) and reports the steps' GPU time too; PyTorch uploads the numpy arrays with `.cuda()` (the CUDA
tensors need none), draws indices with `torch.randint` on the GPU and steps without synchronising until the end.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from coopnn.bench.measure import Stats
from coopnn.errors import CoopnnError
from coopnn.graph.ir import Graph
from coopnn.progress import Progress
from coopnn.train.losses import Loss
from coopnn.train.optim import Optimizer


@dataclass(frozen=True)
class FitTiming:
    """Wall clock of a whole fit (its data set's upload included), and its steps' GPU time where the runner reports
    it."""
    wall_ms: float
    gpu_ms: float | None = None


@dataclass(frozen=True)
class TrainingTiming:
    runner: str
    model: str
    batch: int
    status: str  # "measured" or "unavailable"
    note: str = ""
    steps: int = 0
    gpu_ms: Stats | None = None
    host_ms: Stats | None = None
    phases: dict | None = None  # median GPU ms of the step's parts, where the runner can run them apart
    # host ms of a step on a batch already on the GPU (coopnn: coopnn device arrays; PyTorch: host_ms, its data
    # being on the GPU already)
    resident_host_ms: Stats | None = None
    # host ms of a step on a batch in PyTorch CUDA tensors (coopnn: as `Trainer.step` takes them, where PyTorch has
    # a CUDA device; PyTorch: host_ms)
    cuda_host_ms: Stats | None = None
    fit_steps: int = 0
    fit: FitTiming | None = None  # a fit from the data set in numpy arrays
    fit_cuda: FitTiming | None = None  # the same from the data set in PyTorch CUDA tensors
    keeps_tape: bool = True  # whether the step stores layer inputs and deltas between kernels (the roofline's bytes)

    @property
    def samples_per_s(self) -> float | None:
        return None if self.gpu_ms is None else self.batch / (self.gpu_ms.median / 1e3)

    @property
    def fit_samples_per_s(self) -> float | None:
        return None if self.fit is None else self.batch * self.fit_steps / (self.fit.wall_ms / 1e3)

    def record(self) -> dict:
        return {**asdict(self), "samples_per_s": self.samples_per_s, "fit_samples_per_s": self.fit_samples_per_s}


class CoopnnTrainingRunner:
    """A coopnn `Trainer` on a model prepared on `backend` (for coopvec, with the weight-gradient method and step
    kernel, and any other of its `training_options`), with `loss` and `optimizer` (L2 and Adam(lr=1e-3) unless
    given): the host times are of its calls, as a user makes them; the GPU times and the step's parts are read from
    its training session."""

    def __init__(self, graph: Graph, backend: str, gradients: str | None = None, step: str | None = None, *,
                 loss: str | Loss = "l2", optimizer: Optimizer | None = None, **options: str):
        from coopnn.model import prepare
        from coopnn.train.optim import Adam
        from coopnn.trainer import Trainer

        options.update({name: value for name, value in (("gradients", gradients), ("step", step))
                        if value is not None})
        self.model = prepare(graph, backend=backend)
        try:
            self.trainer = Trainer(self.model, loss, Adam(lr=1e-3) if optimizer is None else optimizer, **options)
        except BaseException:
            self.model.close()
            raise
        self.session = self.trainer.session
        self.input, self.output = graph.inputs[0].name, graph.outputs[0].name
        tape = getattr(self.session, "tape", None)
        self.keeps_tape = tape is None or bool(tape.layers)

    def step(self, x, y) -> float | None:
        self.trainer.step(x, y)
        return getattr(self.session, "last_gpu_ms", None)

    def phases(self, x: np.ndarray, y: np.ndarray, runs: int) -> dict | None:
        """GPU ms of the step kernel alone (forward, loss, backward onto the tape) and of the weight-gradient
        kernels: medians of submissions of the step's first part (`loss`) and first two parts (`gradients`)."""
        if not hasattr(self.session, "gradients"):
            return None
        feeds, targets = {self.input: x}, {self.output: y}
        medians = []
        for part in (self.session.loss, self.session.gradients):
            times = []
            for _ in range(runs):
                part(feeds, targets)
                times.append(self.session.last_gpu_ms)
            medians.append(float(np.median(times)))
        return {"step_kernel_ms": medians[0], "weight_gradients_ms": medians[1] - medians[0]}

    def resident_steps(self, x: np.ndarray, y: np.ndarray, steps: int) -> list[float]:
        """Host ms of `steps` `Trainer.step` calls on (x, y) as coopnn device arrays."""
        import coopnn

        return self._timed_steps(coopnn.to_device(x), coopnn.to_device(y), steps)

    def cuda_steps(self, x: np.ndarray, y: np.ndarray, steps: int) -> list[float] | None:
        """Host ms of `steps` `Trainer.step` calls on (x, y) as PyTorch CUDA tensors; None where PyTorch has no CUDA
        device or the session cannot share memory with CUDA."""
        if torch_cuda_unavailable_reason() or not getattr(self.session, "steps_take_cuda_arrays", False):
            return None
        import torch

        return self._timed_steps(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda(), steps)

    def _timed_steps(self, x, y, steps: int) -> list[float]:
        times = []
        for _ in range(steps):
            started = time.perf_counter()
            self.trainer.step(x, y)
            times.append((time.perf_counter() - started) * 1e3)
        return times

    def fit(self, x, y, steps: int, batch: int) -> FitTiming:
        """A whole `Trainer.fit` of `steps` steps on batches drawn from (x, y), without `on_step` or a progress
        bar: the data's checks and upload, the steps as one run, and the weights handed to the model."""
        gpu_before = getattr(self.session, "total_gpu_ms", 0.0)
        started = time.perf_counter()
        self.trainer.fit(x, y, steps=steps, batch_size=batch, progress=False)
        return FitTiming((time.perf_counter() - started) * 1e3,
                         getattr(self.session, "total_gpu_ms", 0.0) - gpu_before or None)

    def cuda_fit(self, x: np.ndarray, y: np.ndarray, steps: int, batch: int) -> FitTiming | None:
        """`fit` from (x, y) in PyTorch CUDA tensors; None where PyTorch has no CUDA device or the session cannot
        share memory with CUDA."""
        if torch_cuda_unavailable_reason() or not getattr(self.session, "takes_cuda_arrays", False):
            return None
        import torch

        inputs, targets = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        torch.cuda.synchronize()
        return self.fit(inputs, targets, steps, batch)

    def close(self) -> None:
        self.trainer.close()
        self.model.close()


class TorchAmpTrainingRunner:
    """The same MLP in PyTorch on CUDA: fp16 autocast, GradScaler, fused Adam, inputs already on the device."""

    def __init__(self, graph: Graph):
        import torch

        from coopnn.train.gpu.plan import plan_training

        self.torch = torch
        activations = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid,
                       "silu": torch.nn.SiLU, "gelu": torch.nn.GELU}
        layers = []
        for layer in plan_training(graph).layers:
            layers.append(torch.nn.Linear(layer.cols, layer.rows))
            if layer.activation is not None:
                layers.append(activations[layer.activation.op.value]())
        if plan_training(graph).prefix:
            raise CoopnnError("the PyTorch training baseline covers plain MLPs (no input stage)")
        self.net = torch.nn.Sequential(*layers).cuda()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=1e-3, fused=True)
        self.scaler = torch.amp.GradScaler("cuda")
        self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.data: tuple | None = None

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        torch = self.torch
        if self.data is None or self.data[0].shape[0] != x.shape[0]:
            self.data = (torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda())
        inputs, targets = self.data
        self.start.record()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(self.net(inputs).float(), targets)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.end.record()
        torch.cuda.synchronize()
        return self.start.elapsed_time(self.end)

    def fit(self, x: np.ndarray, y: np.ndarray, steps: int, batch: int) -> FitTiming:
        """`steps` steps on batches drawn from (x, y): their upload with `.cuda()`, then the steps."""
        started = time.perf_counter()
        inputs, targets = self.torch.from_numpy(x).cuda(), self.torch.from_numpy(y).cuda()
        self._steps(inputs, targets, steps, batch)
        return FitTiming((time.perf_counter() - started) * 1e3)

    def cuda_fit(self, x: np.ndarray, y: np.ndarray, steps: int, batch: int) -> FitTiming:
        """`fit` on (x, y) already in CUDA tensors: the steps alone."""
        inputs, targets = self.torch.from_numpy(x).cuda(), self.torch.from_numpy(y).cuda()
        self.torch.cuda.synchronize()
        started = time.perf_counter()
        self._steps(inputs, targets, steps, batch)
        return FitTiming((time.perf_counter() - started) * 1e3)

    def _steps(self, inputs, targets, steps: int, batch: int) -> None:
        torch = self.torch
        for _ in range(steps):
            rows = torch.randint(0, inputs.shape[0], (batch,), device="cuda")
            self.optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(self.net(inputs[rows]).float(), targets[rows])
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        torch.cuda.synchronize()

    def close(self) -> None:
        self.net = self.optimizer = self.data = None


def torch_cuda_unavailable_reason() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed"
    import torch

    return None if torch.cuda.is_available() else f"PyTorch {torch.__version__} sees no CUDA device"


WARMUP_WINDOW = 10  # steps whose median time is compared with the window before
SETTLED = 0.03  # the step time has settled when two windows in a row agree within this fraction
WARMUP_LIMIT = 5  # warm-up stops after this many times warmup_seconds, settled or not


def warm_up(step: Callable[[], float | None], min_seconds: float) -> tuple[float, bool]:
    """Run `step` (GPU ms of one step, or None where the runner has no GPU clock: then host ms count) for at least
    `min_seconds` and until two windows of `WARMUP_WINDOW` steps in a row have medians within `SETTLED` of each
    other, or `WARMUP_LIMIT` times `min_seconds` have passed; the seconds taken and whether the time settled. No
    warm-up when `min_seconds` is 0."""
    if min_seconds <= 0:
        return 0.0, False
    started, previous = time.perf_counter(), None
    while True:
        times = []
        for _ in range(WARMUP_WINDOW):
            t0 = time.perf_counter()
            ms = step()
            times.append(ms if ms is not None else (time.perf_counter() - t0) * 1e3)
        elapsed, current = time.perf_counter() - started, float(np.median(times))
        settled = previous is not None and abs(current - previous) <= SETTLED * previous
        if (settled and elapsed >= min_seconds) or elapsed >= WARMUP_LIMIT * min_seconds:
            return elapsed, settled
        previous = current


def measure_training(name: str, make: Callable[[], object], model: str, graph: Graph, batch: int, steps: int,
                     warmup_seconds: float, seed: int = 0, fit_steps: int = 0, low: float = -1.0) -> TrainingTiming:
    """Time `steps` steps of the runner `make()` builds (after warming up), and with `fit_steps` a device-resident
    fit of that many steps, on inputs uniform in [`low`, 1); "unavailable" with the reason when it cannot run here."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(low, 1, (batch, graph.inputs[0].shape[1])).astype(np.float32)
    y = rng.uniform(0, 1, (batch, graph.outputs[0].shape[1])).astype(np.float32)
    try:
        runner = make()
    except (CoopnnError, RuntimeError, KeyError) as e:
        return TrainingTiming(name, model, batch, "unavailable", f"{type(e).__name__}: {e}")
    try:
        warmed, settled = warm_up(lambda: runner.step(x, y), warmup_seconds)
        note = "" if not warmup_seconds else f"warm-up {warmed:.1f} s" + ("" if settled else ", not settled")
        gpu, host = [], []
        bar = Progress(steps, label=f"{name} {model}")
        for _ in range(steps):
            t0 = time.perf_counter()
            ms = runner.step(x, y)
            host.append((time.perf_counter() - t0) * 1e3)
            if ms is not None:
                gpu.append(ms)
            bar.advance()
        bar.close()
        phases = runner.phases(x, y, steps) if hasattr(runner, "phases") else None
        resident = (Stats.of(runner.resident_steps(x, y, steps)) if hasattr(runner, "resident_steps")
                    else Stats.of(host))
        cuda = runner.cuda_steps(x, y, steps) if hasattr(runner, "cuda_steps") else host
        fit = fit_cuda = None
        if fit_steps:
            data = (rng.uniform(low, 1, (4 * batch, x.shape[1])).astype(np.float32),
                    rng.uniform(0, 1, (4 * batch, y.shape[1])).astype(np.float32))
            fit, fit_cuda = runner.fit(*data, fit_steps, batch), runner.cuda_fit(*data, fit_steps, batch)
    except CoopnnError as e:
        return TrainingTiming(name, model, batch, "unavailable", f"{type(e).__name__}: {e}")
    finally:
        runner.close()
    return TrainingTiming(name, model, batch, "measured", note, steps, Stats.of(gpu) if gpu else None, Stats.of(host),
                          phases, resident, Stats.of(cuda) if cuda else None, fit_steps if fit else 0, fit, fit_cuda,
                          getattr(runner, "keeps_tape", True))
