"""`KernelTrainingSession`: training steps on a Vulkan device, many of them in one command buffer.

The session keeps everything on the device: fp32 master weights, their gradients, the optimizer's slots, the working
copy the step kernel reads, the tape, the per-sample losses, and the training state words (status, loss scale, good
steps, optimizer steps: `TRAINING_STATE_FIELDS`). A step runs the step kernel (forward, loss, backward onto the tape),
the target's weight-gradient kernels, the optimizer kernel (which ends the step in its last workgroup:
`coopnn.shaders.training.step_state`, the batch's loss into a history row, the skip and loss-scale bookkeeping), and
whatever turns the working copy into what the step kernel reads. Nothing in a step waits for the host, so `run_steps`
records a step on a data set already on the device once (`upload_data`, `recorded_runs`; the step kernel reads each
batch from it at the rows the sampler of `coopnn.shaders.targets.sampler` draws) and submits it in blocks of steps
back to back, reading each block's losses once it has finished; `step` is the same with one batch uploaded from the
host. A target's session composes one step kernel and one gradient method (`coopnn.train.gpu.families`) and asks
them what differs: parameter widths, kernels, buffers, dispatches (`coopnn.backends.portable.training`,
`coopnn.backends.coopvec.training`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

from coopnn.graph.ir import Graph
from coopnn.shaders.targets.encodings.grid import SCATTER_FEATURES
from coopnn.shaders.training.gradients import partial_sum_invocations
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.shaders.training.optimizer import optimizer_groups, optimizer_shader
from coopnn.shaders.training.step_state import LOSS_TILE, REDUCE_WIDTH, loss_tile_shader
from coopnn.shaders.training.tuning import DEFAULT, Tuning
from coopnn.interop.tensors import rows_of
from coopnn.train.gpu.batch_inputs import BatchInputs
from coopnn.train.gpu.families import GradientMethod, StepKernel
from coopnn.train.gpu.bookkeeping import StepBookkeeping
from coopnn.train.gpu.flat_parameters import flatten, unflatten
from coopnn.train.gpu.optimizer_values import optimizer_push
from coopnn.train.gpu.recorded_runs import RecordedRuns
from coopnn.train.gpu.resident import KeptBuffers, ResidentData
from coopnn.runtime.executable import load_kernel
from coopnn.shaders.targets.base import Binary
from coopnn.train.gpu.plan import TrainingPlan, plan_training
from coopnn.train.gpu.step_buffers import StepBuffers
from coopnn.train.gpu.step_program import LOSS, TAPE, TARGET, step_program
from coopnn.train.gpu.table_decay import decayed_elements
from coopnn.train.losses import Loss
from coopnn.train.optim import Optimizer

class KernelTrainingSession(RecordedRuns, StepBuffers):
    granularity = 1  # the step kernel runs a multiple of this many invocations (padding masked out)
    working_dtype = "f32"
    tape_itemsize = 4
    tape_slack = 0  # feature rows of capacity allocated after the tape's last region
    skip_nonfinite = False  # whether a step with a non-finite gradient is skipped (with dynamic loss scaling)
    growth_interval = 0  # with skip_nonfinite: good steps in a row after which the loss scale doubles
    takes_cuda_arrays = True  # `upload_data` copies CUDA arrays on the GPU (`Trainer.fit` hands them over as such)
    step_method: StepKernel  # the two members the session composes (`coopnn.train.gpu.families`)
    gradient_method: GradientMethod

    def __init__(self, graph: Graph, loss: Loss, optimizer: Optimizer, device: str | int | None):
        from coopnn.runtime.vk.memory import HostAccess

        self.plan: TrainingPlan = plan_training(graph)
        self.loss_function, self.optimizer = loss, optimizer
        self.tuning = self.choose_tuning()
        self.step_method = self.choose_step()
        self.layout = self.parameter_layout(self.step_method.padded)
        method = self.gradient_method
        self.tape = TapeLayout(self.layout.layers if method.keeps_tape else (), method.delta_layout(self))
        self.program = step_program(self.plan, loss, self.tape, accumulate=method.accumulates, layout=self.layout)
        self.last_gpu_ms: float | None = None  # of the last submission
        self.total_gpu_ms = 0.0  # of every submission of training steps so far
        self.steps_run = 0  # of the last run_steps
        self.optimizer_kernel_shader = self.make_optimizer_shader()
        self.loss_tile_shader = loss_tile_shader()
        self.gradient_shaders = self.gradient_method.shaders(self)
        self.context = self.open_device(device)
        try:
            self.binary = self.compile_step()
            self.granularity = self.step_method.granularity(self.granularity, self.binary)
            self.step_kernel = load_kernel(self.context, self.binary, f"{graph.name} training step")
            self.optimizer_kernel = load_kernel(self.context, self.optimizer_kernel_shader)
            self.loss_tile_kernel = load_kernel(self.context, self.loss_tile_shader)
            self.gradient_kernels = [load_kernel(self.context, shader) for shader in self.gradient_shaders]
            size = self.layout.size * 4
            self.master = self.context.create_buffer(size, HostAccess.NONE)
            self.gradient = self.context.create_buffer(size, HostAccess.NONE)
            self.slots = {slot: self.context.create_buffer(size, HostAccess.NONE) for slot in optimizer.slots}
            self.books = StepBookkeeping(self.context, optimizer)
            self.state = self.books.state
            self.recordings: dict = {}  # run key -> Recording, least recently used first
            self.batch_inputs = BatchInputs(self.context)
            self.kept_data = KeptBuffers.on(self.context)  # the last fit's data set, for the next of its sizes
            initial = {name: self._constant(constant) for p in self.plan.layers
                       for name, constant in ((p.weight, p.weight_constant), (p.bias, p.bias_constant))}
            initial.update({t.name: self._constant(t.constant).reshape(-1) for t in self.plan.tables})
            self.master.upload(flatten(self.layout, initial))
            self.load_optimizer_state(optimizer.state_dict())
            self.create_weights()
            self.sync_weights()
            self.capacity = 0
            self.io: dict[int, Any] = {}
            self.prepare_tape(0)
        except BaseException:
            self.context.close()
            raise

    def binaries(self) -> dict[str, Binary]:
        """Every kernel a step dispatches, by name (`Trainer.kernel_statistics`)."""
        return {"step": self.binary, **self.step_method.binaries(self),
                **{f"gradients {i}": s for i, s in enumerate(self.gradient_shaders)},
                "optimizer": self.optimizer_kernel_shader, "loss tile": self.loss_tile_shader}

    # ----- what targets define, and what the session asks its members ----------------------------------------------

    def choose_tuning(self) -> Tuning:
        """The knobs of the session's kernels (`coopnn.shaders.training.tuning`) for the model."""
        return DEFAULT

    def choose_step(self) -> StepKernel:
        """The step kernel for the model (`self.plan`), before the device is known."""
        return self.step_method

    def parameter_layout(self, padded) -> ParameterLayout:
        """The flat parameters of the plan with every layer's widths padded by `padded` (a step kernel's)."""
        return ParameterLayout.of([(p.weight, p.bias, padded(p.rows), padded(p.cols)) for p in self.plan.layers],
                                  [(t.name, t.size) for t in self.plan.tables])

    def features(self) -> set[str]:
        """What the device must enable for every kernel of a step (the step kernel's are the target's to add, but for
        the atomic adds of a trained grid's gradient)."""
        return set(self.optimizer_kernel_shader.features).union(
            self.loss_tile_shader.features, *(s.features for s in self.gradient_shaders),
            self.table_features() if self.layout.tables else ())

    def table_features(self) -> frozenset[str]:
        """What the step kernel's atomic adds of a trained grid's gradient need of the device."""
        return SCATTER_FEATURES

    def open_device(self, device):
        """The session's scope on the shared context of `device`, with `features` (BackendUnavailableError naming
        what the device lacks)."""
        from coopnn.runtime.vk.shared import open_context

        return open_context(device, features=self.features())

    @property
    def adds_partials(self) -> bool:
        """Whether the optimizer adds the partial gradients itself: not where a grid's gradient, accumulated by the
        step kernel into the gradient, is read alongside the layers' sums."""
        return self.gradient_method.optimizer_adds_partials and not self.layout.tables

    def make_optimizer_shader(self) -> Binary:
        return optimizer_shader(self.optimizer.name, self.working_dtype, self.skip_nonfinite, self.growth_interval,
                                self.adds_partials, blocked=self.step_method.keeps_blocked_copy,
                                decay_limit=bool(self.layout.tables))

    def blocked_copy(self) -> tuple:
        """(block index, blocked working copy) buffers where the step kernel `keeps_blocked_copy`, else ()."""
        return ()

    def compile_step(self) -> Binary:
        return self.step_method.compile(self)

    def create_weights(self) -> None:
        """Make the buffers the step kernel reads its weights from (once, before `sync_weights`)."""
        self.step_method.create_weights(self)

    def sync_weights(self) -> None:
        """Make the weights the step kernel reads equal the master weights (after they were loaded)."""
        raise NotImplementedError

    def weights_buffer(self):
        """The buffer bound as the step kernel's weights."""
        return self.step_method.weights_buffer(self)

    def partial_chunks(self, capacity: int) -> int:
        return self.gradient_method.partial_chunks(self, capacity)

    def gradient_steps(self, batch: int, count: int) -> list:
        """Dispatches summing the tape into `self.gradient` (and leaving a trained grid's gradient there)."""
        return self.table_gradient_steps() + self._summed(*self.gradient_method.products(self, batch, count))

    def _summed(self, steps: list, chunks: int) -> list:
        """The gradient method's dispatches, then the partial sum where they leave `chunks` partial gradients."""
        return (steps + [self.partial_sum_dispatch(chunks)]) if chunks else steps

    def partial_sum_dispatch(self, chunks: int):
        """The gradient as the sum of the first `chunks` partial gradients (the session's last gradient shader)."""
        from coopnn.runtime.vk.commands import Dispatch

        shader, kernel = self.gradient_shaders[-1], self.gradient_kernels[-1]
        return Dispatch(kernel, (self.partials, self.gradient, self.state),
                        shader.pack_push(count=self.layout.layers_size, chunks=chunks),
                        kernel.group_count_for(partial_sum_invocations(self.layout.layers_size)))

    # ----- flat parameter arrays ------------------------------------------------------------------------------------

    def _constant(self, name: str) -> np.ndarray:
        return np.asarray(self.plan.graph.constants[name], np.float32)

    # ----- kernels and buffers --------------------------------------------------------------------------------------

    def fill_zero(self, *buffers, size: int | None = None, offset: int = 0):
        """Zero `buffers` (`size` bytes from `offset` when given, else from `offset` to the end)."""
        from coopnn.runtime.vk.commands import Recorded
        from coopnn.runtime.vk.loader import load_vulkan

        vk = load_vulkan()
        return Recorded(lambda cmd: [vk.vkCmdFillBuffer(cmd, b.handle, offset, b.size - offset if size is None
                                                        else size, 0) for b in buffers])

    def table_gradient_zeroing(self) -> list:
        """Zeroing the trained grid's part of the gradient, which the step kernel adds into."""
        start = self.layout.layers_size * 4
        return [self.fill_zero(self.gradient, size=self.layout.size * 4 - start, offset=start)] if self.layout.tables \
            else []

    def table_gradient_cleanup(self) -> list:
        """Commands after a step kernel that no gradient steps follow, leaving what it adds a grid's gradient into as
        the next step kernel expects it: none, it is zeroed before every step kernel."""
        return []

    def table_gradient_buffer(self):
        """The buffer the step kernel adds a trained grid's gradient into."""
        return self.gradient

    def table_gradient_steps(self) -> list:
        """Dispatches after the step kernel that leave a trained grid's gradient in the gradient: none, the step
        kernel adds it there."""
        return []

    @property
    def loss_scale(self) -> float:
        return self.books.loss_scale

    @loss_scale.setter
    def loss_scale(self, value: float) -> None:
        self.books.loss_scale = value

    def scaling_state(self) -> dict[str, float | int]:
        """The dynamic loss scaling's state, for checkpoints."""
        return {"loss_scale": self.books.loss_scale, "good_steps": self.books.good_steps}

    def load_scaling_state(self, state: Mapping[str, Any]) -> None:
        """Restore what `scaling_state` returned (ValueError when it is malformed or out of range)."""
        scale, good = float(state["loss_scale"]), int(state["good_steps"])
        if not (np.isfinite(scale) and scale > 0 and good >= 0):
            raise ValueError(f"loss scale {scale} and good steps {good} are out of range")
        self.books.loss_scale, self.books.good_steps = scale, good

    # ----- steps ----------------------------------------------------------------------------------------------------

    def _buffers(self, data: ResidentData | None):
        """The step kernel's buffers, in binding order: its inputs from `data` where given."""
        def bound(b):
            if b.role == "state":
                return self.state
            if b.role == "partials":
                return self.partials
            if b.role == "table_gradient":
                return self.table_gradient_buffer()
            return data.buffers[b.name] if data is not None and b.role == "input" else self.io[b.index]

        return (self.weights_buffer(),) + tuple(bound(b) for b in self.binary.bindings[1:])

    def _write_batch(self, feeds: Mapping[str, Any], targets: Mapping[str, Any], batch: int) -> tuple[int, tuple]:
        """Put one batch into the step kernel's inputs (`BatchInputs.write`): the invocation count (padding samples
        read the first sample's row and their losses and gradients are masked out), and the bindings filled on the
        GPU."""
        self._ensure_capacity(batch)
        count = self.invocations(batch)
        inputs = self._input_bindings()
        sources = {b.index: self._source(b, feeds, targets) for b in inputs}
        return count, self.batch_inputs.write(inputs, self.io, sources, batch)

    def _input_bindings(self) -> list:
        """The step kernel's bindings of role "input": the model's inputs and the targets."""
        return [b for b in self.binary.bindings[1:] if b.role == "input"]

    def _source(self, binding, feeds: Mapping[str, Any], targets: Mapping[str, Any]) -> Any:
        """What the input `binding` reads: the targets, or the model's input of its name."""
        return targets[self.plan.output] if binding.name == TARGET else feeds[binding.name]

    @property
    def steps_take_cuda_arrays(self) -> bool:
        """Whether `step` takes CUDA arrays on the GPU (memory shared with CUDA), rather than through the host."""
        return self.batch_inputs.takes_cuda_arrays

    def _forward_backward(self, batch: int, count: int, data: ResidentData | None = None, seed: int = 0) -> list:
        """The step kernel's commands on the batch in its inputs (`_write_batch`), or on batches its sampler draws
        from `data` with `seed` (the whole of it in order where `batch` covers it)."""
        from coopnn.runtime.vk.commands import Dispatch

        rows = batch if data is None else data.rows
        push = self.binary.pack_push(count=count, batch=batch, capacity=self.capacity, rows=rows,
                                     seed=seed & 0xFFFFFFFF, whole=int(batch >= rows))
        kernel, groups = self.step_method.launch(self, count)
        return [*self.gradient_method.step_prologue(self), *self.table_gradient_zeroing(),
                Dispatch(kernel, self._buffers(data), push, groups)]

    def _update(self, batch: int) -> list:
        """The commands after the backward pass of a step: the batch's loss in tiles alongside the first gradient
        dispatch, the rest of the gradients, the optimizer (which ends the step: its loss into the history, the state
        words), the working copy."""
        gradients, chunks = self.gradient_commands(batch)
        return gradients + self.optimizer_commands(batch, chunks)

    def gradient_commands(self, batch: int) -> tuple[list, int]:
        """`_update`'s commands up to the optimizer, and the partial gradients they leave for it to add (0 where the
        gradient is summed): the seam where data-parallel training averages them across ranks
        (`coopnn.distributed.kernel_steps`)."""
        from coopnn.runtime.vk.commands import Dispatch

        count = self.invocations(batch)
        tiles = -(-batch // LOSS_TILE)
        sums = self.loss_tile_shader.pack_push(count=tiles * REDUCE_WIDTH, batch=batch)
        loss_tiles = Dispatch(self.loss_tile_kernel, (self.io[self._binding(LOSS)], self.loss_sums), sums, tiles)
        steps, chunks = self.gradient_method.products(self, batch, count)
        if not self.adds_partials:
            steps, chunks = self._summed(steps, chunks), 0
        table = self.table_gradient_steps()
        steps = table + steps
        # The first dispatch of each (a grid's widening, the weight gradients') reads what the step kernel wrote (a
        # grid's sums, the tape or the accumulated gradients), the loss tiles the per-sample losses: disjoint memory
        # but for the status word, which they only OR atomically.
        for first in sorted({0, len(table)}):
            if first < len(steps) and all(isinstance(step, Dispatch) for step in steps[:first + 1]):
                steps[first] = dataclasses.replace(steps[first], alongside=True)
        return [loss_tiles, *steps], chunks

    def optimizer_commands(self, batch: int, chunks: int) -> list:
        """`_update`'s commands from the optimizer on, after `gradient_commands` left `chunks` partial gradients."""
        return [self.optimizer_dispatch(batch, -(-batch // LOSS_TILE), chunks), *self.step_method.working_steps(self)]

    def _mean_losses(self, steps: int, batch: int) -> np.ndarray:
        self.total_gpu_ms += self.last_gpu_ms or 0.0
        return self.books.after(steps) / (batch * self.plan.out_features)

    def _schedule_upload(self) -> dict:
        return {self.books.schedule: (0, self.books.schedule.size)}

    def _losses(self, batch: int) -> tuple[Any, dict]:
        from coopnn.runtime.vk.memory import Placement

        loss_buffer = self.io[self._binding(LOSS)]
        wanted = {loss_buffer: (0, batch * 4), self.state: (0, self.state.size)}
        return loss_buffer, {b: r for b, r in wanted.items() if b.placement is Placement.STAGED}

    def _binding(self, name: str) -> int:
        return next(b.index for b in self.binary.bindings if b.name == name)

    @property
    def tape_buffer(self):
        return self.io[self._binding(TAPE)]

    def optimizer_dispatch(self, batch: int, tiles: int, chunks: int):
        """The optimizer over the gradient, or the `chunks` partial gradients where it adds them, then the step's end
        over the `tiles` sums of the batch's losses."""
        from coopnn.runtime.vk.commands import Dispatch

        adds_partials = self.adds_partials
        buffers = (self.master, self.partials if adds_partials else self.gradient, self.state,
                   self.working_buffer(), *(self.slots[s] for s in self.optimizer.slots), self.books.schedule,
                   self.loss_sums, self.books.history, *self.blocked_copy())
        return Dispatch(self.optimizer_kernel, buffers, self._optimizer_push(batch, tiles, chunks),
                        optimizer_groups(self.layout.size, adds_partials))

    def _optimizer_push(self, batch: int, tiles: int = 0, chunks: int = 0) -> bytes:
        """The optimizer kernel's push constants now: its settings, the gradient's scale for `batch`, the step's
        `tiles` of loss sums and `chunks` of partial gradients (which `batch` determines)."""
        partials = {"chunks": chunks} if self.adds_partials else {}
        if self.layout.tables:
            partials["decay_count"] = decayed_elements(self.layout, self.optimizer)
        return optimizer_push(self.optimizer_kernel_shader, self.optimizer, self.layout.size,
                              1.0 / (batch * self.plan.out_features), terms=tiles, **partials)

    def working_buffer(self):
        """The buffer the optimizer writes the working copy to."""
        return self.weights_buffer()

    # ----- the TrainingSession interface ----------------------------------------------------------------------------

    def step(self, feeds, targets) -> float:
        batch = rows_of(targets[self.plan.output])
        count, copied = self._write_batch(feeds, targets, batch)
        self.books.before(1)
        self.last_gpu_ms = self._step_recording(batch, count, copied).run()
        return float(self._mean_losses(1, batch)[0])

    def loss(self, feeds, targets) -> float:
        batch = rows_of(targets[self.plan.output])
        self.books.sync()
        count, _ = self._write_batch(feeds, targets, batch)
        loss_buffer, downloads = self._losses(batch)
        self.last_gpu_ms = self.context.run(self._forward_backward(batch, count) + self.table_gradient_cleanup(),
                                            downloads)
        return float(np.sum(loss_buffer.read(np.float32, batch), dtype=np.float64) / (batch * self.plan.out_features))

    def gradients(self, feeds, targets) -> dict[str, np.ndarray]:
        """The gradient of the batch's mean loss in every parameter (no update; for tests and tools)."""
        batch = rows_of(targets[self.plan.output])
        self.books.sync()
        count, _ = self._write_batch(feeds, targets, batch)
        # No step end runs to clear the status word the gradient reductions may set, so the last command does.
        self.last_gpu_ms = self.context.run(self._forward_backward(batch, count) + self.gradient_steps(batch, count)
                                            + [self.fill_zero(self.state, size=4)], self._losses(batch)[1])
        raw = self.gradient.download(np.float32, self.layout.size)
        return unflatten(self.layout, self.plan, raw / np.float32(self.loss_scale * batch * self.plan.out_features))

    def parameters(self) -> dict[str, np.ndarray]:
        return unflatten(self.layout, self.plan, self.master.download(np.float32, self.layout.size))

    def load_parameters(self, values: Mapping[str, np.ndarray]) -> None:
        current = self.parameters()
        current.update({k: np.asarray(v, np.float32) for k, v in values.items()})
        self.master.upload(flatten(self.layout, current))
        self.sync_weights()

    def optimizer_state(self) -> dict[str, Any]:
        for slot, buffer in self.slots.items():
            values = buffer.download(np.float32, self.layout.size)
            self.optimizer.state[slot] = unflatten(self.layout, self.plan, values)
        return self.optimizer.state_dict()

    def load_optimizer_state(self, state: Mapping[str, Any]) -> None:
        self.optimizer.load_state_dict(state)
        for slot, buffer in self.slots.items():
            buffer.upload(flatten(self.layout, self.optimizer.state.get(slot, {})))

    def close(self) -> None:
        for recording in self.recordings.values():
            recording.destroy()
        self.recordings = {}
        self.batch_inputs.close()
        self.kept_data.destroy()
        self.context.close()
