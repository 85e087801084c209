"""How the tiled step kernel holds a model (`coopnn.train.gpu.tiling`): the tile of samples and its
buffers for the device's workgroup memory and subgroup size, and the refusal where nothing fits (no GPU)."""

from __future__ import annotations

from coopnn.train.gpu.tiling import Tiling, tiling_for, unsupported_reason, workgroup_memory
from coopnn.nets.builders import mlp_graph
from coopnn.train.gpu.plan import plan_training
from coopnn.train.losses import get_loss


def test_models_no_wider_than_64_take_tiles_of_64_in_place():
    plan = plan_training(mlp_graph(32, [64] * 4, 16, activation="relu"))
    assert tiling_for(plan) == Tiling(64, True, 128)
    # subgroups of 64: two of them, fewer than a 64-wide layer's four column tiles
    assert tiling_for(plan, max_subgroup_size=64) == Tiling(64, False, 128)
    in_place = workgroup_memory(plan, Tiling(64, True, 128))
    assert tiling_for(plan, shared_memory=in_place - 1) == Tiling(64, False, 128)


def test_tiles_of_64_in_two_buffers_where_in_place_does_not_fit():
    plan = plan_training(mlp_graph(64, [128] * 4, 16, activation="relu"))
    # subgroups of 64: four of them, fewer than a 128-wide layer's eight column tiles
    assert tiling_for(plan, max_subgroup_size=64) == Tiling(64, False, 256)
    in_place = workgroup_memory(plan, Tiling(128, True, 256))
    assert tiling_for(plan, shared_memory=in_place) == Tiling(128, True, 256)
    assert tiling_for(plan, shared_memory=in_place - 1) == Tiling(64, False, 256)


def test_the_devices_workgroup_memory_decides():
    plan = plan_training(mlp_graph(3, [64, 64], 3, activation="relu"))
    needed = workgroup_memory(plan, tiling_for(plan))
    assert unsupported_reason(plan, get_loss("l2"), needed) is None
    two_buffers = workgroup_memory(plan, Tiling(64, False, 128))
    assert f"needs {two_buffers} bytes" in unsupported_reason(plan, get_loss("l2"), needed - 1)


def test_layers_with_more_column_tiles_than_subgroups_keep_two_buffers():
    # 144 wide: nine column tiles, eight subgroups of 32 in 256 invocations
    assert tiling_for(plan_training(mlp_graph(16, [144, 144], 8, activation="relu"))) == Tiling(64, False, 256)
    # 128 wide, but 64 outputs: the loss terms of 128 samples take the in-place tile past 48 KB
    wide_outputs = plan_training(mlp_graph(16, [128, 128], 64, activation="relu"))
    assert workgroup_memory(wide_outputs, Tiling(128, True, 256)) > 49152
    assert tiling_for(wide_outputs) == Tiling(64, False, 256)
