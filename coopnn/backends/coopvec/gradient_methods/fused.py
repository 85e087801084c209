"""Fused weight gradients: the fused step kernel (`coopnn.backends.coopvec.tiled_fused`) forms each work-group's
partial gradient from the tiles it holds, with no tape, and the optimizer adds them."""

from __future__ import annotations

from coopnn.backends.coopvec import tiled_fused
from coopnn.shaders.training.gradients import partial_sum_shader
from coopnn.train.gpu.families import GradientMethod


class FusedGradients(GradientMethod):
    name = "fused"
    keeps_tape = False
    optimizer_adds_partials = True  # the fused kernel flags non-finite partial gradients
    features = tiled_fused.FEATURES
    device_features = tiled_fused.FEATURES

    def step_for(self, requested: str) -> str:
        if requested not in ("auto", "tiled"):
            raise ValueError(f"gradients='fused' forms them in the tiled step kernel, not the {requested} one")
        return "fused"

    def shaders(self, session):
        return [partial_sum_shader()]  # the step kernel writes partial gradients; their sum serves `gradients`

    def partial_chunks(self, session, capacity: int) -> int:
        return tiled_fused.groups_for(capacity, session.binary.workgroup_size[0]) if capacity else 0

    def products(self, session, batch: int, count: int) -> tuple[list, int]:
        return [], tiled_fused.groups_for(count, session.binary.workgroup_size[0])


METHOD = FusedGradients()
