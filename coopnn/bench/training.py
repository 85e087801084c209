"""The training benchmark: one optimizer step on a batch, coopnn's training backends against PyTorch.

Each runner takes whole steps (forward, loss, backward, optimizer update) of the L2 loss with Adam on the same model,
batch and random data, and reports the GPU time of a step (from its own clock: Vulkan timestamps around the step's
submission, CUDA events around PyTorch's step) and the host time of the call: coopnn's from numpy arrays, from coopnn
device arrays and from PyTorch CUDA tensors (as `Trainer.step` takes them), PyTorch's from CUDA tensors. The PyTorch
baseline is what a PyTorch user would train with on that GPU: automatic mixed precision (fp16 autocast with a gradient
scaler) and the fused Adam. Before timing, every runner steps for `warmup_seconds` and then on until its step time
settles (`warm_up`): the H100 ran work several times slower after idling, and a machine just started ran the same steps
up to 2x slower for a while after 2 s of warm-up. The warm-up taken is in each result's note.

With `fit_steps`, a runner that can also trains as a user's loop would: `fit_steps` steps on batches drawn from a
data set already on the device (four batches' worth of random samples), timed by the wall clock from the call to
the last result on the host, and the data set's upload before it apart. coopnn runs the steps as `Trainer.fit` does
without `on_step` (one `session.run_steps`, its losses read back block by block) and reports its GPU time too; it fits
again from the same data set in PyTorch CUDA tensors (uploaded as `Trainer.fit` takes them), where PyTorch has a CUDA
device. PyTorch draws indices with `torch.randint` on the GPU and steps without synchronising until the end.
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


@dataclass(frozen=True)
class FitTiming:
    """Wall clock of a device-resident fit's data set upload and of its steps, and the steps' GPU time where the
    runner reports it."""
    upload_ms: float
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
    fit_wall_ms: float | None = None  # wall clock of the whole device-resident fit, its data set's upload apart
    fit_gpu_ms: float | None = None  # GPU time of its submissions, where the runner reports it
    fit_upload_ms: float | None = None  # wall clock of the data set's upload from numpy before the fit
    fit_cuda: FitTiming | None = None  # coopnn: the same fit from the data set in PyTorch CUDA tensors

    @property
    def samples_per_s(self) -> float | None:
        return None if self.gpu_ms is None else self.batch / (self.gpu_ms.median / 1e3)

    @property
    def fit_samples_per_s(self) -> float | None:
        return None if not self.fit_wall_ms else self.batch * self.fit_steps / (self.fit_wall_ms / 1e3)

    def record(self) -> dict:
        return {**asdict(self), "samples_per_s": self.samples_per_s, "fit_samples_per_s": self.fit_samples_per_s}


class CoopnnTrainingRunner:
    """A coopnn training session (backend and, for coopvec, the weight-gradient method and step kernel)."""

    def __init__(self, graph: Graph, backend: str, gradients: str | None = None, step: str | None = None):
        from coopnn.backends import training_backend
        from coopnn.train.losses import get_loss
        from coopnn.train.optim import Adam

        if gradients is None and step is None:
            self.session = training_backend(backend).prepare_training(graph, get_loss("l2"), Adam(lr=1e-3), device=None)
        else:
            from coopnn.backends.coopvec.training import CoopvecTrainingSession

            self.session = CoopvecTrainingSession(graph, get_loss("l2"), Adam(lr=1e-3), None,
                                                  gradients=gradients or "auto", step=step or "auto")
        self.input, self.output = graph.inputs[0].name, graph.outputs[0].name

    def step(self, x: np.ndarray, y: np.ndarray) -> float | None:
        self.session.step({self.input: x}, {self.output: y})
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
        """Host ms of `steps` steps on (x, y) as coopnn device arrays, taken as `Trainer.step` takes them."""
        import coopnn

        feeds, targets = {self.input: coopnn.to_device(x)}, {self.output: coopnn.to_device(y)}
        return self._timed_steps(lambda: (feeds, targets), steps)

    def cuda_steps(self, x: np.ndarray, y: np.ndarray, steps: int) -> list[float] | None:
        """Host ms of `steps` steps on (x, y) as PyTorch CUDA tensors, converted as `Trainer.step` converts them;
        None where PyTorch has no CUDA device or the session cannot share memory with CUDA."""
        if torch_cuda_unavailable_reason() or not getattr(self.session, "steps_take_cuda_arrays", False):
            return None
        import torch

        from coopnn.interop.tensors import as_cuda_input

        inputs, targets = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        return self._timed_steps(lambda: ({self.input: as_cuda_input(self.input, inputs, x.shape[1:], "f32")},
                                          {self.output: as_cuda_input(self.output, targets, y.shape[1:], "f32")}),
                                 steps)

    def _timed_steps(self, batch: Callable[[], tuple[dict, dict]], steps: int) -> list[float]:
        """Host ms of each of `steps` steps on the (feeds, targets) `batch()` gives, its call included."""
        times = []
        for _ in range(steps):
            started = time.perf_counter()
            self.session.step(*batch())
            times.append((time.perf_counter() - started) * 1e3)
        return times

    def fit(self, x: np.ndarray, y: np.ndarray, steps: int, batch: int) -> FitTiming:
        """`steps` steps on batches the device draws from (x, y), uploaded first: one run, as `Trainer.fit` runs
        them without `on_step`."""
        return self._fit(lambda: ({self.input: x}, {self.output: y}), steps, batch)

    def cuda_fit(self, x: np.ndarray, y: np.ndarray, steps: int, batch: int) -> FitTiming | None:
        """`fit` from (x, y) in PyTorch CUDA tensors, converted as `Trainer.fit` converts them; None where PyTorch
        has no CUDA device or the session cannot share memory with CUDA."""
        if torch_cuda_unavailable_reason() or not getattr(self.session, "takes_cuda_arrays", False):
            return None
        import torch

        from coopnn.interop.tensors import as_cuda_input

        inputs, targets = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        torch.cuda.synchronize()
        return self._fit(lambda: ({self.input: as_cuda_input(self.input, inputs, x.shape[1:], "f32")},
                                  {self.output: as_cuda_input(self.output, targets, y.shape[1:], "f32")}),
                         steps, batch)

    def _fit(self, data_set: Callable[[], tuple[dict, dict]], steps: int, batch: int) -> FitTiming:
        started = time.perf_counter()
        data = self.session.upload_data(*data_set())
        uploaded = time.perf_counter()
        gpu_before = getattr(self.session, "total_gpu_ms", 0.0)
        try:
            self.session.run_steps(data, 0, steps, batch, 0)
            finished = time.perf_counter()
        finally:
            data.close()
        return FitTiming((uploaded - started) * 1e3, (finished - uploaded) * 1e3,
                         getattr(self.session, "total_gpu_ms", 0.0) - gpu_before or None)

    def close(self) -> None:
        self.session.close()


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
        torch = self.torch
        started = time.perf_counter()
        inputs, targets = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        torch.cuda.synchronize()
        uploaded = time.perf_counter()
        for _ in range(steps):
            rows = torch.randint(0, inputs.shape[0], (batch,), device="cuda")
            self.optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(self.net(inputs[rows]).float(), targets[rows])
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        torch.cuda.synchronize()
        return FitTiming((uploaded - started) * 1e3, (time.perf_counter() - uploaded) * 1e3)

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
                     warmup_seconds: float, seed: int = 0, fit_steps: int = 0) -> TrainingTiming:
    """Time `steps` steps of the runner `make()` builds (after warming up), and with `fit_steps` a device-resident
    fit of that many steps; "unavailable" with the reason when it cannot run here."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (batch, graph.inputs[0].shape[1])).astype(np.float32)
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
            data = (rng.uniform(-1, 1, (4 * batch, x.shape[1])).astype(np.float32),
                    rng.uniform(0, 1, (4 * batch, y.shape[1])).astype(np.float32))
            fit = runner.fit(*data, fit_steps, batch)
            fit_cuda = runner.cuda_fit(*data, fit_steps, batch) if hasattr(runner, "cuda_fit") else None
    except CoopnnError as e:
        return TrainingTiming(name, model, batch, "unavailable", f"{type(e).__name__}: {e}")
    finally:
        runner.close()
    return TrainingTiming(name, model, batch, "measured", note, steps, Stats.of(gpu) if gpu else None, Stats.of(host),
                          phases, resident, Stats.of(cuda) if cuda else None, fit_steps if fit else 0,
                          fit and fit.wall_ms, fit and fit.gpu_ms, fit and fit.upload_ms, fit_cuda)
