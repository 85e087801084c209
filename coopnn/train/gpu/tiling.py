"""What shape the tiled training-step kernel (`coopnn.backends.coopvec.tiled_step`) takes for a model on a device:
widths padded to whole matrices, invocations per work-group, how a work-group holds its tile of samples (`Tiling`),
the workgroup memory that takes, and why a model cannot be trained this way; a `Tuning` may set the tiling's
knobs."""

from __future__ import annotations

from dataclasses import dataclass

from coopnn.layouts.pack import align_up
from coopnn.shaders.kernel.derivatives import DERIVATIVES
from coopnn.shaders.training.tiles.addressing import MATRIX
from coopnn.train.gpu.loss_kernels import LOSS_KERNELS
from coopnn.train.gpu.plan import TrainingPlan
from coopnn.shaders.training.tuning import DEFAULT, Tuning
from coopnn.train.losses import Loss

# Samples per work-group: TILE on models no wider than NARROW_LAYERS, WIDE_TILE on wider ones, in one activation buffer
# updated in place where every layer has no more column tiles than the work-group has subgroups, else TILE in two
# buffers: the fastest tiles on the 128-wide and on the 64-wide benchmark models
# (bench/results/nvidia-h100-80gb-hbm3-2026-11-27-tiled-step-ablation.md).
TILE, WIDE_TILE = 64, 128
# Invocations per work-group: 256 (eight subgroups of 32) for models with a layer wider than NARROW_LAYERS, 128 for the
# others, whose layers have fewer 16-wide column tiles than 8 subgroups: each the faster on its models
# (bench/results/nvidia-h100-80gb-hbm3-2026-11-27-tiled-step.md).
WIDE_INVOCATIONS, NARROW_INVOCATIONS, NARROW_LAYERS = 256, 128, 64
ROW_PAD = 8  # halves past the widest layer in every activation row: rows start on different banks
# Bytes of workgroup memory every device with cooperative vectors offers (the H100's maxComputeSharedMemorySize), and
# the subgroup size of those devices (NVIDIA's), where the caller does not give the device's own
SHARED_MEMORY, SUBGROUP_SIZE = 49152, 32


def padded(n: int) -> int:
    """A width as the session lays out parameters and the tape for this kernel: whole matrices."""
    return align_up(n, MATRIX)


def widest(plan: TrainingPlan) -> int:
    """The widest input or output of `plan`'s layers, padded."""
    return max(padded(n) for layer in plan.layers for n in (layer.rows, layer.cols))


def activation_stride(plan: TrainingPlan) -> int:
    """Halves from one sample's row of an activation buffer to the next: the widest layer, then ROW_PAD."""
    return widest(plan) + ROW_PAD


def invocations_for(plan: TrainingPlan) -> int:
    """Invocations per work-group for `plan`."""
    return NARROW_INVOCATIONS if widest(plan) <= NARROW_LAYERS else WIDE_INVOCATIONS


@dataclass(frozen=True)
class Tiling:
    """How a work-group holds its samples: `samples` of them, in one activation buffer updated in place (each layer's
    products all read before a barrier, then its epilogues write; a column tile a subgroup) or in two, one read and
    the other written (a subgroup takes every NumSubgroups-th column tile)."""

    samples: int
    in_place: bool
    invocations: int
    split_rows: bool = False  # in place: `LayerPasses.row_groups` subgroups share a column tile's row tiles
    lean_barrier: bool = False  # the forward pass's last barrier orders storage only where the backward reads it


def workgroup_memory(plan: TrainingPlan, tiling: Tiling) -> int:
    """Bytes of workgroup memory the kernel takes for `plan`: the activation buffers, the index matrix, the loss
    terms of the last layer."""
    buffers = 1 if tiling.in_place else 2
    return (buffers * tiling.samples * activation_stride(plan) * 2 + MATRIX * MATRIX * 4
            + tiling.samples * padded(plan.out_features) * 4)


def tiling_for(plan: TrainingPlan, shared_memory: int = SHARED_MEMORY,
               max_subgroup_size: int = SUBGROUP_SIZE, tuning: Tuning = DEFAULT) -> Tiling:
    """TILE samples (WIDE_TILE for models wider than NARROW_LAYERS) in place where every layer's column tiles have a
    subgroup each (on subgroups of up to `max_subgroup_size`) and it fits `shared_memory`; else TILE in two
    buffers. The knobs `tuning` sets (samples, invocations, in place) replace those choices."""
    invocations = tuning.step_invocations or invocations_for(plan)
    in_place = Tiling(tuning.step_samples or (TILE if widest(plan) <= NARROW_LAYERS else WIDE_TILE), True,
                      invocations, bool(tuning.step_row_groups), bool(tuning.lean_barrier))
    fits = (widest(plan) <= invocations // max_subgroup_size * MATRIX
            and workgroup_memory(plan, in_place) <= shared_memory)
    if tuning.in_place or (tuning.in_place is None and fits):
        return in_place
    return Tiling(tuning.step_samples or TILE, False, invocations, bool(tuning.step_row_groups),
                  bool(tuning.lean_barrier))


def tiling_problem(plan: TrainingPlan, tiling: Tiling, max_subgroup_size: int) -> str | None:
    """Why the kernel cannot take `tiling` (as a `Tuning` may ask for it), or None."""
    if tiling.samples % MATRIX or tiling.invocations % tiling.samples or tiling.invocations % max_subgroup_size:
        return (f"a tile of {tiling.samples} samples on {tiling.invocations} invocations is not whole {MATRIX}s of "
                f"samples with whole tiles and subgroups of invocations")
    if tiling.split_rows and not tiling.in_place:
        return "only a tiling in place splits a layer's row tiles among subgroups"
    if tiling.in_place and widest(plan) > tiling.invocations // max_subgroup_size * MATRIX:
        return (f"in place, its widest layer ({widest(plan)}) needs a subgroup a column tile, more than "
                f"{tiling.invocations} invocations have")
    return None


def untrainable_reason(plan: TrainingPlan, loss: Loss) -> str | None:
    """Why no kernel on tiles can train this model with `loss` (a loss or activation it has no kernel for), or None."""
    if loss.name not in LOSS_KERNELS:
        return f"it has no kernel for the loss {loss.name!r}"
    for layer in plan.layers:
        if layer.activation is not None and layer.activation.op not in DERIVATIVES:
            return f"the activation {layer.activation.op.value} of {layer.node} has no derivative"
    return None


def unsupported_reason(plan: TrainingPlan, loss: Loss, shared_memory: int,
                       max_subgroup_size: int = SUBGROUP_SIZE, tuning: Tuning = DEFAULT) -> str | None:
    """Why the tiled kernel cannot train this model (tuned by `tuning`) on a device with `shared_memory` bytes of
    workgroup memory and subgroups of up to `max_subgroup_size`, or None."""
    reason = untrainable_reason(plan, loss)
    if reason is not None:
        return reason
    tiling = tiling_for(plan, shared_memory, max_subgroup_size, tuning)
    reason = tiling_problem(plan, tiling, max_subgroup_size)
    if reason is not None:
        return reason
    needed = workgroup_memory(plan, tiling)
    if needed > shared_memory:
        return (f"a tile of {tiling.samples} samples of its layers needs {needed} bytes of workgroup memory, the "
                f"device offers {shared_memory}")
    return None
