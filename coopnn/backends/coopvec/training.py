"""Training on the cooperative-vector target: float16 products on tensor cores, float32 master weights.

`CoopvecTrainingSession` composes one step kernel (`step_kernels`: per-sample, tiled, fused) and one weight-gradient
method (`gradient_methods`: cooperative matrix, cooperative vector, outer products, reduce-first outer products,
fused), found by name, and asks them for their kernels, buffers and dispatches; a trained grid's tables train in the
per-sample step kernel, which adds their gradient with one member of `table_atomics` (float32 atomics, or float16
pairs). The optimizer updates the float32 master weights and writes a float16 row-major working copy, which the step
kernel reads itself or turns into what it reads.

Deltas are float16, so the loss gradient is scaled (dynamic loss scaling, kept on the device by the step's end in the
optimizer kernel): a step whose gradients overflow is skipped and the scale halved; it starts at 1 and doubles after
`GROWTH_INTERVAL` good steps. Shapes are padded to whole 16-byte groups as the coopvec target pads them; padded
parameters stay zero (their gradients are zero).
"""

from __future__ import annotations

import functools

import numpy as np

from coopnn.backends.coopvec import coopvec_gradients
from coopnn.shaders.training import coopmat_gradients
from coopnn.backends.coopvec.gradient_methods import AUTO_GRADIENTS, gradient_methods
from coopnn.backends.coopvec.step_kernels import selectable, step_kernels
from coopnn.backends.coopvec.table_atomics import auto_table_atomics, table_atomics_methods
from coopnn.backends.coopvec.target import FEATURES
from coopnn.shaders.training.gradients import FEATURES as GRADIENT_FEATURES
from coopnn.shaders.training.shader import BASE_FEATURES
from coopnn.runtime.executable import load_kernel
from coopnn.shaders.training.tuning import Tuning, tuning_for
from coopnn.train.gpu.session import KernelTrainingSession

GROWTH_INTERVAL = 1000
# What any of the session's kernels may need, whichever gradient method it takes.
TRAINING_FEATURES = frozenset().union(FEATURES, {"bufferDeviceAddress"}, GRADIENT_FEATURES, BASE_FEATURES,
                                      *(m.device_features for m in gradient_methods().values()),
                                      *(m.features for m in table_atomics_methods().values()))
GRADIENT_METHODS = ("auto", *gradient_methods())
STEP_METHODS = ("auto", *(k.name for k in selectable()))
TABLE_ATOMICS = ("auto", *table_atomics_methods())


def _alternatives(names) -> str:
    """'a', 'b' or 'c'."""
    quoted = [repr(n) for n in names]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


class CoopvecTrainingSession(KernelTrainingSession):
    granularity = coopvec_gradients.SUB
    working_dtype = "f16"
    tape_itemsize = 2
    tape_slack = coopmat_gradients.TILE
    skip_nonfinite = True
    growth_interval = GROWTH_INTERVAL

    def __init__(self, *args, gradients: str = "auto", step: str = "auto", table_atomics: str = "auto",
                 tuning: Tuning | None = None, **kwargs):
        """`gradients`: how weight gradients are reduced, "coopmat" (cooperative-matrix products of the tape),
        "coopvec" (cooperative-vector products, per row and chunk), "outer_product" (per-sample outer products
        accumulated by the coopvec step kernel), "outer_product_reduced" (workgroup sums accumulated by it), "fused"
        (formed by the tiled step kernel from the tiles it holds, `tiled_fused`: no tape) or "auto"
        (`AUTO_GRADIENTS`).
        `step`: the forward/backward kernel, "tiled" (`tiled_step`: cooperative matrices over tiles of samples),
        "coopvec" (one invocation per sample, cooperative vectors), "coopvec_rows" (that kernel reading the
        optimizer's row-major working copy, with no conversion between steps) or "auto" (the first of them that
        `takes_auto` the model: "tiled" for deep models; for a model with a trained grid, which only the per-sample
        kernels train, "coopvec_rows" where it can read the working copy; else "coopvec").
        `table_atomics`: how the per-sample kernel adds a trained grid's gradient, "float32" (float32 atomics),
        "float16_pairs" (float16 pairs, VK_NV_shader_atomic_float16_vector) or "auto" (`auto_table_atomics`: float16
        pairs where the device offers them).
        `tuning`: the knobs of the tiled step and cooperative-matrix gradient kernels, by default the model's
        (`tuning_for`)."""
        if gradients not in GRADIENT_METHODS:
            raise ValueError(f"gradients must be one of {', '.join(map(repr, GRADIENT_METHODS))}, not {gradients!r}")
        if step not in STEP_METHODS:
            raise ValueError(f"step must be {_alternatives(STEP_METHODS)}, not {step!r}")
        if table_atomics not in TABLE_ATOMICS:
            raise ValueError(f"table_atomics must be {_alternatives(TABLE_ATOMICS)}, not {table_atomics!r}")
        # "auto" is chosen once the device is known (`open_device`)
        self.table_atomics = None if table_atomics == "auto" else table_atomics_methods()[table_atomics]
        self.gradient_method = gradient_methods()[AUTO_GRADIENTS if gradients == "auto" else gradients]
        self.requested_step = self.gradient_method.step_for(step)
        self.requested_tuning = tuning
        super().__init__(*args, **kwargs)

    def choose_tuning(self) -> Tuning:
        if self.requested_tuning is not None:
            return self.requested_tuning
        return tuning_for((layer.rows, layer.cols) for layer in self.plan.layers)

    def choose_step(self):
        if self.requested_step != "auto":
            return step_kernels()[self.requested_step]
        return next(kernel for kernel in selectable() if kernel.takes_auto(self))

    def features(self) -> set[str]:
        return (super().features() | set(FEATURES) | {"bufferDeviceAddress"} | self.gradient_method.features
                | set().union(*(s.features for s in self.table_shaders)))

    def table_features(self) -> frozenset[str]:
        return self.table_atomics.features

    def open_device(self, device):
        from coopnn.runtime.vk import shared

        if self.layout.tables:
            info = shared.chosen_device(device)
            if self.table_atomics is None:
                self.table_atomics = auto_table_atomics(info)
            self.table_atomics.check_device(info)
            self.table_atomics = self.table_atomics.tuned(self.tuning)
        return super().open_device(device)

    @functools.cached_property
    def table_shaders(self) -> list:
        """The kernels after the step kernel that bring a trained grid's sums into the gradient."""
        return self.table_atomics.shaders(self) if self.layout.tables else []

    def binaries(self):
        return {**super().binaries(), **{f"table gradient {i}": s for i, s in enumerate(self.table_shaders)}}

    def compile_step(self):
        if self.requested_step == "auto" and self.step_method.unsupported_reason(self):
            # the device's workgroup memory or subgroups rule out what "auto" chose before it was known
            self.step_method = next(kernel for kernel in selectable() if kernel.takes_auto(self)
                                    and kernel is not self.step_method and not kernel.unsupported_reason(self))
            self.optimizer_kernel_shader = self.make_optimizer_shader()  # without the blocked copy
        return self.step_method.compile(self)

    def create_weights(self) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        self.step_method.create_weights(self)
        self.working = self.context.create_buffer(self.layout.size * 2, HostAccess.NONE, device_address=True)
        self.gradient_method.create_buffers(self)
        if self.layout.tables:
            self.table_atomics.create_buffers(self)
            self.table_kernels = [load_kernel(self.context, shader) for shader in self.table_shaders]
            if self.table_atomics.clears_after_step:
                self.context.run([self._table_fill()])

    def _table_fill(self):
        buffer, offset, size = self.table_atomics.zeroed(self)
        return self.fill_zero(buffer, size=size, offset=offset)

    def table_gradient_zeroing(self) -> list:
        if not self.layout.tables or self.table_atomics.clears_after_step:
            return []
        return [self._table_fill()]

    def table_gradient_cleanup(self) -> list:
        return [self._table_fill()] if self.layout.tables and self.table_atomics.clears_after_step else []

    def table_gradient_buffer(self):
        return self.table_atomics.gradient_buffer(self)

    def table_gradient_steps(self) -> list:
        return self.table_atomics.after_step(self) if self.layout.tables else []

    def sync_weights(self) -> None:
        working = self.master.download(np.float32, self.layout.size).astype(np.float16)
        self.working.upload(working)
        if self.step_method.keeps_blocked_copy:
            blocked = np.empty_like(working)
            blocked[self.block_order] = working
            self.blocked.upload(blocked)
        self.context.run(self.step_method.working_steps(self))

    def blocked_copy(self) -> tuple:
        return (self.block_index, self.blocked) if self.step_method.keeps_blocked_copy else ()

    def working_buffer(self):
        return self.working

    def prepare_tape(self, capacity: int) -> None:
        super().prepare_tape(capacity)
        if self.partials is not None:
            # Padded delta rows are never written and must read as zero.
            self.context.run([self.fill_zero(self.tape_buffer, self.partials)])
