"""Training on the cooperative-vector target: float16 products on tensor cores, float32 master weights.

The per-sample step kernel multiplies with the weights in the driver's TrainingOptimal layout, forward and transposed
(OpCooperativeVectorMatrixMulAddNV / MatrixMulNV with Transpose); the tiled one (`tiled_step`, which "auto" takes for
models of `AUTO_TILED_FROM_LAYERS` layers or more) reads a float16 copy of the weights in 16 x 16 blocks, which the
optimizer writes beside the row-major working copy (`ParameterLayout.block_index`). Weight gradients
come from `coopnn.backends.coopvec.coopmat_gradients` or `coopnn.backends.coopvec.coopvec_gradients` (tape products
per chunk of samples; the optimizer adds the former's partial gradients itself, `partial_sum_shader` the latter's),
or the outer-product methods (`coopnn.backends.coopvec.outer_product`) accumulate them in the step kernel. The
optimizer updates the float32 master weights and writes a float16 row-major working copy, which
vkCmdConvertCooperativeVectorMatrixNV turns into TrainingOptimal in the same command buffer (biases are copied).

Deltas are float16, so the loss gradient is scaled (dynamic loss scaling, kept on the device by the step's end in the
optimizer kernel): a step whose gradients overflow is skipped and the scale halved; it starts at 1 and doubles after
`GROWTH_INTERVAL` good steps. Shapes are padded to whole 16-byte
groups as the coopvec target pads them; padded parameters stay zero (their gradients are zero).
"""

from __future__ import annotations

import math

import numpy as np

from coopnn.backends.coopvec.layouts import pack_plan, padded
from coopnn.backends.coopvec import (coopmat_gradients, coopvec_gradients, outer_product, tiled_fused, tiled_step,
                                     tiled_tiling)
from coopnn.backends.coopvec.products import weight_plan
from coopnn.backends.coopvec.target import FEATURES, CoopvecTarget
from coopnn.errors import CompileError
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.shaders.training.gradients import FEATURES as GRADIENT_FEATURES, partial_sum_shader, widen_shader
from coopnn.shaders.training.shader import BASE_FEATURES
from coopnn.train.gpu.session import KernelTrainingSession

GROWTH_INTERVAL = 1000
LAYOUT = "training_optimal"
# "auto" takes cooperative-matrix weight gradients: on the H100 (bench/results/*-2026-11-27-training-b*.md) they took
# 0.18 / 0.24 / 0.75 ms a step at batch 2^18 for mlp_3_64x2_3 / mlp_32_64x4_16 / mlp_64_128x4_16, cooperative-vector
# gradients 0.33 / 0.65 / 1.72 ms; at 2^16 0.15 / 0.16 / 0.19 against 0.08 / 0.17 / 0.43 ms, the one loss (mlp_3_64x2_3
# at 2^16) smaller than the wins, and the session does not know the batch when it compiles. Fused gradients
# (`tiled_fused`, no tape) made whole steps slower on the H200: 0.467 against 0.356 ms (mlp_32_64x4_16) and 0.239
# against 0.182 (mlp_3_64x2_3) at 2^18 (bench/results/nvidia-h200-2026-11-28-fused-gradients.md).
AUTO_GRADIENTS = "coopmat"
# The step kernel stores sample-major deltas as whole vectors, feature-major ones a component at a time; the
# cooperative-matrix gradients read either. On the H100 at batch 2^18 (bench/results/
# nvidia-h100-80gb-hbm3-2026-11-27-sample-major-deltas.md), sample-major made whole steps of the two 5-layer benchmark
# MLPs 13% (mlp_32_64x4_16) and 5% (mlp_64_128x4_16) faster, and of the 3-layer mlp_3_64x2_3 12% slower (its step
# kernel 0.128 -> 0.175 ms). Models of 4 layers were not measured.
SAMPLE_MAJOR_DELTAS_FROM_LAYERS = 4
# "auto" takes the tiled step kernel (`tiled_step`) for models of this many layers or more, the per-sample
# cooperative-vector one for the others. On the H100 (GPU ms of a whole step with cooperative-matrix gradients, tiled
# against per-sample; bench/results/nvidia-h100-80gb-hbm3-2026-11-27-training-tiled-step-b*.md): mlp_64_128x4_16 1.39
# against 1.87 at batch 2^18 and 0.40 against 0.52 at 2^16, mlp_32_64x4_16 0.54 against 0.61 and 0.18 against 0.22
# (both five layers); once its tiles of 64 were updated in place, the three-layer mlp_3_64x2_3 0.265 against 0.271 at
# 2^18 and 0.100 against 0.125 at 2^16 (`...-2026-11-27-tiled-step-ablation.md`). Two-layer models were not measured.
AUTO_TILED_FROM_LAYERS = 3
# What any of the session's kernels may need, whichever gradient method it takes.
TRAINING_FEATURES = (FEATURES | {"bufferDeviceAddress"} | coopmat_gradients.FEATURES | coopvec_gradients.FEATURES
                     | outer_product.FEATURES | tiled_fused.FEATURES | GRADIENT_FEATURES | BASE_FEATURES)
GRADIENT_METHODS = ("auto", "coopmat", "coopvec", "fused", *outer_product.ACCUMULATOR_LAYOUTS)
STEP_METHODS = ("auto", "tiled", "coopvec")
# The outer-product methods take layers up to this many inputs and outputs: on the H100 (2026-11-25) a step of
# mlp_32_64x4_16 at 2^16 took 1.3 ms with them (0.27 ms with cooperative-matrix gradients), and mlp_64_128x4_16 did
# not finish three steps at 2^16 in 200 s; wider layers are refused rather than left to run that long.
OUTER_PRODUCT_WIDEST = 64


class CoopvecTrainingSession(KernelTrainingSession):
    granularity = coopvec_gradients.SUB
    working_dtype = "f16"
    tape_itemsize = 2
    tape_slack = coopmat_gradients.TILE
    skip_nonfinite = True
    growth_interval = GROWTH_INTERVAL

    def __init__(self, *args, gradients: str = "auto", step: str = "auto", **kwargs):
        """`gradients`: how weight gradients are reduced, "coopmat" (cooperative-matrix products of the tape),
        "coopvec" (cooperative-vector products, per row and chunk), "outer_product" (per-sample outer products
        accumulated by the coopvec step kernel), "outer_product_reduced" (workgroup sums accumulated by it), "fused"
        (formed by the tiled step kernel from the tiles it holds, `tiled_fused`: no tape) or "auto" (the fastest
        measured, `AUTO_GRADIENTS`).
        `step`: the forward/backward kernel, "tiled" (`tiled_step`: cooperative matrices over tiles of samples),
        "coopvec" (one invocation per sample, cooperative vectors) or "auto"."""
        if gradients not in GRADIENT_METHODS:
            raise ValueError(f"gradients must be one of {', '.join(map(repr, GRADIENT_METHODS))}, not {gradients!r}")
        if step not in STEP_METHODS:
            raise ValueError(f"step must be 'auto', 'tiled' or 'coopvec', not {step!r}")
        self.accumulates = gradients in outer_product.ACCUMULATOR_LAYOUTS
        if self.accumulates and step == "tiled":
            raise ValueError(f"gradients={gradients!r} accumulates in the coopvec step kernel, not the tiled one")
        self.fuses = gradients == "fused"
        if self.fuses and step == "coopvec":
            raise ValueError("gradients='fused' forms them in the tiled step kernel, not the coopvec one")
        self.gradient_method = AUTO_GRADIENTS if gradients == "auto" else gradients
        self.requested_step = "coopvec" if self.accumulates else "tiled" if self.fuses else step
        # the cooperative-matrix products and the fused kernel flag non-finite partial gradients, so the optimizer can
        # add them
        self.optimizer_adds_partials = self.gradient_method in ("coopmat", "fused")
        super().__init__(*args, **kwargs)

    def layer_shapes(self):
        self.step_method = self.requested_step if self.requested_step != "auto" else self.auto_step()
        width = tiled_tiling.padded if self.step_method == "tiled" else padded
        return [(p.weight, p.bias, width(p.rows), width(p.cols)) for p in self.plan.layers]

    def auto_step(self) -> str:
        """The step kernel "auto" takes (`AUTO_TILED_FROM_LAYERS`), where the tiled one can train the model in the
        workgroup memory every device of this target has (`tiled_tiling.SHARED_MEMORY`; the device's own is checked as
        it compiles)."""
        if (len(self.plan.layers) < AUTO_TILED_FROM_LAYERS
                or tiled_tiling.unsupported_reason(self.plan, self.loss_function, tiled_tiling.SHARED_MEMORY)):
            return "coopvec"
        return "tiled"

    def features(self) -> set[str]:
        return (super().features() | set(FEATURES) | {"bufferDeviceAddress"}
                | (outer_product.FEATURES if self.accumulates else set())
                | (tiled_fused.FEATURES if self.fuses else set()))

    def delta_layout(self) -> str:
        if self.gradient_method == "coopmat" and (self.step_method == "tiled"
                                                  or len(self.plan.layers) >= SAMPLE_MAJOR_DELTAS_FROM_LAYERS):
            return "samples"
        return "features"

    def step_groups(self, count: int) -> int:
        if self.fuses:
            return tiled_fused.groups_for(count, self.binary.workgroup_size[0])
        return super().step_groups(count)

    def make_gradient_shaders(self):
        if self.accumulates:
            widest = max(max(layer.rows, layer.cols) for layer in self.layout.layers)
            if widest > OUTER_PRODUCT_WIDEST:
                raise CompileError(f"gradients={self.gradient_method!r} takes layers of up to {OUTER_PRODUCT_WIDEST} "
                                   f"inputs and outputs, this model has {widest}: accumulating outer products that "
                                   f"wide ran for minutes on the H100; use gradients='coopvec' or 'auto'")
            return [widen_shader()]
        if self.fuses:  # the step kernel writes partial gradients; their sum serves `gradients`
            return [partial_sum_shader()]
        if self.gradient_method == "coopmat":
            return [coopmat_gradients.coopmat_gradient_shader(self.layout, self.tape), partial_sum_shader()]
        return [coopvec_gradients.coopvec_gradient_shader(self.layout, self.tape), partial_sum_shader()]

    def partial_chunks(self, capacity: int) -> int:
        if self.accumulates:
            return 0
        if self.fuses:
            return tiled_fused.groups_for(capacity, self.binary.workgroup_size[0]) if capacity else 0
        if self.gradient_method == "coopmat":
            return coopmat_gradients.most_chunks(self.layout, capacity)
        return -(-capacity // coopvec_gradients.CHUNK)

    def compile_step(self):
        from coopnn.backends.coopvec.driver import converted_size, matrix_format

        shared_memory = self.context.info.limits.max_compute_shared_memory_size
        subgroups = self.context.info.subgroup
        max_subgroup_size = subgroups.max_size or subgroups.size
        min_subgroup_size = subgroups.min_size or subgroups.size
        if self.requested_step == "auto" and self.step_method == "tiled" and tiled_tiling.unsupported_reason(
                self.plan, self.loss_function, shared_memory, max_subgroup_size):
            self.step_method = "coopvec"
            self.optimizer_kernel_shader = self.make_optimizer_shader()  # without the blocked copy
        if self.fuses:
            reason = tiled_fused.unsupported_reason(self.plan, self.loss_function, shared_memory, max_subgroup_size)
            if reason is not None:
                raise CompileError(f"gradients='fused' cannot train {self.plan.graph.name!r}: {reason}; use "
                                   f"gradients='coopmat' or 'auto'")
            binary = tiled_fused.fused_step_shader(self.program, self.plan, self.loss_function, self.layout,
                                                   shared_memory, max_subgroup_size, min_subgroup_size)
            self.granularity = math.lcm(self.granularity, binary.workgroup_size[0])  # whole tiles
            return binary
        if self.step_method == "tiled":
            binary = tiled_step.tiled_step_shader(self.program, self.plan, self.loss_function, self.layout, self.tape,
                                                  shared_memory, max_subgroup_size, min_subgroup_size)
            self.granularity = math.lcm(self.granularity, binary.workgroup_size[0])  # whole workgroups, no tail
            return binary

        def reserve(matrix):
            rows, cols = matrix.shape
            return bytes(converted_size(self.context, matrix_format(FP16, rows, cols, "row_major", matrix.strides[0]),
                                        matrix_format(FP16, rows, cols, LAYOUT)))

        self.packed = pack_plan(weight_plan(self.program, FP16), LAYOUT, reserve)
        self.image = self.packed
        if self.accumulates:

            def optimal_size(rows, cols):
                return converted_size(self.context, matrix_format(FP16, rows, cols, "row_major", 2 * cols),
                                      matrix_format(FP16, rows, cols, LAYOUT))

            self.accumulators = outer_product.accumulators(
                self.layout, outer_product.ACCUMULATOR_LAYOUTS[self.gradient_method], len(self.packed.data),
                optimal_size)
            self.image = outer_product.with_accumulators(self.packed, self.accumulators)
        return CoopvecTarget().compile(self.program, FP16, 64, packed=self.image)

    def create_weights(self) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        if self.keeps_blocked_copy():
            self.block_order = self.layout.block_index(tiled_tiling.MATRIX)  # also where `sync_weights` puts them
            self.block_index = self.context.create_buffer(self.block_order.nbytes, HostAccess.NONE)
            self.block_index.upload(self.block_order)
            self.blocked = self.context.create_buffer(self.layout.size * 2, HostAccess.NONE)
        else:
            self.optimal = self.context.create_buffer(len(self.image.data), HostAccess.NONE, device_address=True)
        self.working = self.context.create_buffer(self.layout.size * 2, HostAccess.NONE, device_address=True)
        if self.gradient_method == "outer_product":
            # the TrainingOptimal sums converted to row-major float16, in the flat order
            self.sums = self.context.create_buffer(self.layout.size * 2, HostAccess.NONE, device_address=True)
        if self.gradient_method == "coopvec":
            ones = coopvec_gradients.ones_matrix()
            self.ones = self.context.create_buffer(ones.nbytes, HostAccess.NONE)
            self.ones.upload(ones)

    def sync_weights(self) -> None:
        working = self.master.download(np.float32, self.layout.size).astype(np.float16)
        self.working.upload(working)
        if self.keeps_blocked_copy():
            blocked = np.empty_like(working)
            blocked[self.block_order] = working
            self.blocked.upload(blocked)
        self.context.run(self.working_steps())

    def keeps_blocked_copy(self) -> bool:
        return self.step_method == "tiled"

    def blocked_copy(self) -> tuple:
        return (self.block_index, self.blocked) if self.keeps_blocked_copy() else ()

    def weights_buffer(self):
        return self.blocked if self.keeps_blocked_copy() else self.optimal

    def working_buffer(self):
        return self.working

    def working_steps(self) -> list:
        from coopnn.runtime.vk.commands import Recorded
        from coopnn.backends.coopvec.driver import repack

        if self.step_method == "tiled":
            return []
        return [Recorded(repack(self.context, self.working, self.layout.entries(FP16), self.optimal,
                                self.packed.entries))]

    def prepare_tape(self, capacity: int) -> None:
        super().prepare_tape(capacity)
        if self.partials is not None:
            # Padded delta rows are never written and must read as zero.
            self.context.run([self.fill_zero(self.tape_buffer, self.partials)])

    def step_prologue(self) -> list:
        from coopnn.runtime.vk.commands import Recorded
        from coopnn.runtime.vk.loader import load_vulkan

        if not self.accumulates:
            return []
        vk, (first, size) = load_vulkan(), outer_product.accumulator_range(self.accumulators)
        return [Recorded(lambda cmd: vk.vkCmdFillBuffer(cmd, self.optimal.handle, first, size, 0))]

    def accumulated_gradient_steps(self) -> list:
        """The accumulators widened into the float32 gradient (converted to row-major first where they are not)."""
        from coopnn.backends.coopvec.driver import repack
        from coopnn.runtime.vk.commands import Dispatch, Recorded

        (widen,), (kernel,) = self.gradient_shaders, self.gradient_kernels
        steps, sums, first = [], self.optimal, self.accumulators[next(iter(self.accumulators))].offset // 2
        if self.gradient_method == "outer_product":
            steps.append(Recorded(repack(self.context, self.optimal,
                                         outer_product.by_parameter(self.accumulators, self.layout), self.sums,
                                         self.layout.entries(FP16))))
            sums, first = self.sums, 0
        size = self.layout.size
        return steps + [Dispatch(kernel, (sums, self.gradient, self.state), widen.pack_push(count=size, first=first),
                                 kernel.group_count_for(size))]

    def gradient_products(self, batch: int, count: int) -> tuple[list, int]:
        from coopnn.runtime.vk.commands import Dispatch

        if self.accumulates:
            return self.accumulated_gradient_steps(), 0
        if self.fuses:
            return [], tiled_fused.groups_for(count, self.binary.workgroup_size[0])

        products, product_kernel = self.gradient_shaders[0], self.gradient_kernels[0]
        common = {"batch": count, "capacity": self.capacity, "parameters": self.layout.size}
        if self.gradient_method == "coopmat":
            tasks = coopmat_gradients.task_count(self.layout)
            chunk_tiles, chunks = coopmat_gradients.chunking(self.layout, count)
            reduce = Dispatch(product_kernel, (self.tape_buffer, self.partials, self.state),
                              products.pack_push(count=tasks * coopmat_gradients.SUBGROUP, chunk_tiles=chunk_tiles,
                                                 **common),
                              (tasks, chunks, 1))
        else:
            chunks = -(-count // coopvec_gradients.CHUNK)
            rows = coopvec_gradients.row_starts(self.layout)[-1]
            reduce = Dispatch(product_kernel, (self.tape_buffer, self.partials, self.ones),
                              products.pack_push(count=rows, **common),
                              (product_kernel.group_count_for(rows), chunks, 1))
        return [reduce], chunks
