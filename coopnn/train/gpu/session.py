"""`KernelTrainingSession`: a whole training step on a Vulkan device, in one command buffer.

The session keeps everything on the device: fp32 master weights, their gradients, the optimizer's slots, the working
copy the step kernel reads, the tape and the per-sample losses. A step uploads the batch and runs, in one
submission: the step kernel (forward, loss, backward onto the tape), the target's weight-gradient kernels, the
optimizer kernel, and whatever turns the working copy into what the step kernel reads; it then reads back the
per-sample losses and the status word (non-zero when a gradient was not finite). Targets differ in how they lay out
parameters and reduce gradients; subclasses say how (`coopnn.backends.portable.training`, `coopnn.backends.coopvec.training`).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from coopnn.errors import InputError
from coopnn.graph.ir import Graph
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.shaders.training.optimizer import optimizer_shader
from coopnn.train.gpu.optimizer_values import optimizer_push
from coopnn.runtime.executable import load_kernel
from coopnn.shaders.targets.base import Binary
from coopnn.train.gpu.plan import TrainingPlan, plan_training
from coopnn.train.gpu.step_program import LOSS, TAPE, TARGET, step_program
from coopnn.train.losses import Loss
from coopnn.train.optim import Optimizer

STATUS_WORDS = 4
# One step's tape stays below this, whatever the device allows, so a mistaken batch size fails with a clear error
# rather than exhausting device memory.
MAX_TAPE_BYTES = 2 << 30


class KernelTrainingSession:
    granularity = 1  # the step kernel runs a multiple of this many invocations (padding masked out)
    working_dtype = "f32"
    tape_itemsize = 4
    tape_slack = 0  # feature rows of capacity allocated after the tape's last region
    skip_nonfinite = False

    def __init__(self, graph: Graph, loss: Loss, optimizer: Optimizer, device: str | int | None):
        from coopnn.runtime.vk.memory import HostAccess
        from coopnn.runtime.vk.shared import open_context

        self.plan: TrainingPlan = plan_training(graph)
        self.loss_function, self.optimizer = loss, optimizer
        self.layout = ParameterLayout.of(self.layer_shapes())
        self.tape = TapeLayout(self.layout.layers)
        self.program = step_program(self.plan, loss, self.tape)
        self.loss_scale = 1.0
        self.last_gpu_ms: float | None = None
        self.optimizer_kernel_shader = optimizer_shader(optimizer.name, self.working_dtype, self.skip_nonfinite)
        self.gradient_shaders = self.make_gradient_shaders()
        self.context = open_context(device, features=self.features())
        try:
            self.binary = self.compile_step()
            self.step_kernel = load_kernel(self.context, self.binary, f"{graph.name} training step")
            self.optimizer_kernel = load_kernel(self.context, self.optimizer_kernel_shader)
            self.gradient_kernels = [load_kernel(self.context, shader) for shader in self.gradient_shaders]
            size = self.layout.size * 4
            self.master = self.context.create_buffer(size, HostAccess.NONE)
            self.gradient = self.context.create_buffer(size, HostAccess.NONE)
            self.slots = {slot: self.context.create_buffer(size, HostAccess.NONE) for slot in optimizer.slots}
            self.status = self.context.create_buffer(4 * STATUS_WORDS, HostAccess.READ)
            self.master.upload(self.flatten({p.weight: self._constant(p.weight_constant) for p in self.plan.layers}
                                            | {p.bias: self._constant(p.bias_constant) for p in self.plan.layers}))
            self.load_optimizer_state(optimizer.state_dict())
            self.create_weights()
            self.sync_weights()
            self.capacity = 0
            self.io: dict[int, Any] = {}
            self.prepare_tape(0)
        except BaseException:
            self.context.close()
            raise

    # ----- what targets define --------------------------------------------------------------------------------------

    def layer_shapes(self) -> list[tuple[str, str, int, int]]:
        return [(p.weight, p.bias, p.rows, p.cols) for p in self.plan.layers]

    def features(self) -> set[str]:
        """What the device must enable for every kernel of a step (the step kernel's are the target's to add)."""
        return set(self.optimizer_kernel_shader.features).union(*(s.features for s in self.gradient_shaders))

    def make_gradient_shaders(self) -> list[Binary]:
        """The kernels `gradient_steps` dispatches (made before the device, which must enable their features)."""
        raise NotImplementedError

    def compile_step(self) -> Binary:
        raise NotImplementedError

    def create_weights(self) -> None:
        """Make the buffers the step kernel reads its weights from (once, before `sync_weights`)."""
        raise NotImplementedError

    def sync_weights(self) -> None:
        """Make the weights the step kernel reads equal the master weights (after they were loaded)."""
        raise NotImplementedError

    def weights_buffer(self):
        """The buffer bound as the step kernel's weights."""
        raise NotImplementedError

    def gradient_steps(self, batch: int, count: int) -> list:
        """Dispatches summing the tape into `self.gradient` (raw sums of scaled per-sample gradients)."""
        raise NotImplementedError

    def working_steps(self) -> list:
        """Commands after the optimizer that turn its working copy into what the step kernel reads."""
        return []

    def prepare_tape(self, capacity: int) -> None:
        """Called when the tape was (re)made for `capacity` samples."""

    # ----- flat parameter arrays ------------------------------------------------------------------------------------

    def _constant(self, name: str) -> np.ndarray:
        return np.asarray(self.plan.graph.constants[name], np.float32)

    def flatten(self, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
        """Arrays by parameter name in the flat layout (zero where a target pads)."""
        flat = np.zeros(self.layout.size, np.float32)
        for name, (where, shape) in self.layout.slices().items():
            if name in arrays:
                block = np.zeros(shape, np.float32)
                array = np.asarray(arrays[name], np.float32)
                block[tuple(slice(0, n) for n in array.shape)] = array
                flat[where] = block.reshape(-1)
        return flat

    def unflatten(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        sizes = {p.weight: (p.rows, p.cols) for p in self.plan.layers} | {p.bias: (p.rows,) for p in self.plan.layers}
        out = {}
        for name, (where, shape) in self.layout.slices().items():
            block = flat[where].reshape(shape)
            out[name] = np.ascontiguousarray(block[tuple(slice(0, n) for n in sizes[name])])
        return out

    # ----- kernels and buffers --------------------------------------------------------------------------------------

    def max_capacity(self) -> int:
        limits = self.context.info.limits
        per_sample = max((self.tape.width + self.tape_slack) * self.tape_itemsize, 1)
        limit = min(limits.max_storage_buffer_range, MAX_TAPE_BYTES, limits.max_buffer_size) // per_sample
        groups = limits.max_compute_work_group_count[0] * self.binary.workgroup_size[0]
        return max(self.granularity, min(limit, groups) // self.granularity * self.granularity)

    def _ensure_capacity(self, batch: int) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        count = -(-batch // self.granularity) * self.granularity
        if count <= self.capacity:
            return
        most = self.max_capacity()
        if count > most:
            raise InputError(f"a training step of {batch} samples does not fit on {self.context.info.name}: one step "
                             f"holds at most {most} samples of this model; use a smaller batch_size")
        capacity = min(most, max(self.granularity, 1 << (count - 1).bit_length()))
        for buffer in self.io.values():
            buffer.destroy()
        self.io = {}
        for b in self.binary.bindings[1:]:
            if b.role == "tape":
                self.io[b.index] = self.context.create_buffer(
                    capacity * (self.tape.width + self.tape_slack) * self.tape_itemsize, HostAccess.NONE)
            else:
                access = HostAccess.READ if b.role == "loss" else HostAccess.WRITE
                self.io[b.index] = self.context.create_buffer(capacity * b.features * b.itemsize, access)
        self.capacity = capacity
        self.prepare_tape(capacity)

    def fill_zero(self, *buffers):
        from coopnn.runtime.vk.commands import Recorded
        from coopnn.runtime.vk.loader import load_vulkan

        vk = load_vulkan()
        return Recorded(lambda cmd: [vk.vkCmdFillBuffer(cmd, b.handle, 0, b.size, 0) for b in buffers])

    # ----- a step ---------------------------------------------------------------------------------------------------

    def _run(self, feeds: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray], mode: str) -> float:
        """One submission: the step kernel, then ("gradients", "step") the gradient kernels, then ("step") the
        update; the batch's mean loss."""
        from coopnn.runtime.vk.commands import Dispatch

        target = targets[self.plan.output]
        batch = target.shape[0]
        self._ensure_capacity(batch)
        count = -(-batch // self.granularity) * self.granularity
        for b in self.binary.bindings[1:]:
            if b.role != "input":
                continue
            source = target if b.name == TARGET else feeds[b.name]
            self.io[b.index].write(np.ascontiguousarray(source, b.numpy_dtype).reshape(-1))
            if count > batch:  # padding samples read zeros (their losses and gradients are masked out)
                self.io[b.index].write(np.zeros((count - batch) * b.features, b.numpy_dtype),
                                       batch * b.features * b.itemsize)
        buffers = (self.weights_buffer(),) + tuple(self.io[b.index] for b in self.binary.bindings[1:])
        push = self.binary.pack_push(count=count, batch=batch, capacity=self.capacity, loss_scale=self.loss_scale)
        steps = [self.fill_zero(self.status),
                 Dispatch(self.step_kernel, buffers, push, self.step_kernel.group_count_for(count))]
        if mode != "loss":
            steps += self.gradient_steps(batch, count)
        if mode == "step":
            steps.append(self.optimizer_dispatch(batch))
            steps += self.working_steps()
        loss_buffer = self.io[self._binding(LOSS)]
        self.last_gpu_ms = self.context.run(steps, self._downloads(loss_buffer, batch))
        losses = loss_buffer.read(np.float32, batch)
        value = float(np.sum(losses, dtype=np.float64) / (batch * self.plan.out_features))
        if mode == "step":
            self.after_step(bool(self.status.read(np.uint32, 1)[0]))
        return value

    def _downloads(self, loss_buffer, batch: int) -> dict:
        from coopnn.runtime.vk.memory import Placement

        wanted = {loss_buffer: (0, batch * 4), self.status: (0, 4 * STATUS_WORDS)}
        return {b: r for b, r in wanted.items() if b.placement is Placement.STAGED}

    def _binding(self, name: str) -> int:
        return next(b.index for b in self.binary.bindings if b.name == name)

    @property
    def tape_buffer(self):
        return self.io[self._binding(TAPE)]

    def optimizer_dispatch(self, batch: int):
        from coopnn.runtime.vk.commands import Dispatch

        scale = 1.0 / (self.loss_scale * batch * self.plan.out_features)
        push = optimizer_push(self.optimizer_kernel_shader, self.optimizer, self.optimizer.step_count + 1,
                              self.layout.size, scale)
        buffers = (self.master, self.gradient, self.status, self.working_buffer(),
                   *(self.slots[s] for s in self.optimizer.slots))
        return Dispatch(self.optimizer_kernel, buffers, push, self.optimizer_kernel.group_count_for(self.layout.size))

    def working_buffer(self):
        """The buffer the optimizer writes the working copy to."""
        return self.weights_buffer()

    def after_step(self, overflowed: bool) -> None:
        """Count the step unless it was skipped (`overflowed` with skip_nonfinite)."""
        if not (overflowed and self.skip_nonfinite):
            self.optimizer.step_count += 1

    # ----- the TrainingSession interface ----------------------------------------------------------------------------

    def step(self, feeds, targets) -> float:
        return self._run(feeds, targets, "step")

    def loss(self, feeds, targets) -> float:
        return self._run(feeds, targets, "loss")

    def gradients(self, feeds, targets) -> dict[str, np.ndarray]:
        """The gradient of the batch's mean loss in every parameter (no update; for tests and tools)."""
        batch = targets[self.plan.output].shape[0]
        self._run(feeds, targets, "gradients")
        raw = self.gradient.download(np.float32, self.layout.size)
        return self.unflatten(raw / np.float32(self.loss_scale * batch * self.plan.out_features))

    def parameters(self) -> dict[str, np.ndarray]:
        return self.unflatten(self.master.download(np.float32, self.layout.size))

    def load_parameters(self, values: Mapping[str, np.ndarray]) -> None:
        current = self.parameters()
        current.update({k: np.asarray(v, np.float32) for k, v in values.items()})
        self.master.upload(self.flatten(current))
        self.sync_weights()

    def optimizer_state(self) -> dict[str, Any]:
        for slot, buffer in self.slots.items():
            self.optimizer.state[slot] = self.unflatten(buffer.download(np.float32, self.layout.size))
        return self.optimizer.state_dict()

    def load_optimizer_state(self, state: Mapping[str, Any]) -> None:
        self.optimizer.load_state_dict(state)
        for slot, buffer in self.slots.items():
            buffer.upload(self.flatten(self.optimizer.state.get(slot, {})))

    def close(self) -> None:
        self.context.close()
