"""The training kernels without a GPU: every variant passes spirv-val for Vulkan 1.3, declares the bindings, push
constants and features it is documented to, and `pack_push` / `optimizer_push` pack what they are given."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from coopnn.shaders.training.gradients import partial_sum_shader, tape_gradient_shader
from coopnn.shaders.training.layout import DELTA_LAYOUTS, ParameterLayout, TapeLayout
from coopnn.shaders.training.optimizer import SCHEDULE_ROWS, optimizer_shader
from coopnn.train.gpu.optimizer_values import optimizer_push, schedule_rows
from coopnn.train.optim import SGD, Adam
from tests.backends.portable.test_target import spirv_val

LAYOUTS = {
    "two_layers": ParameterLayout.of([("w0", "b0", 8, 3), ("w1", "b1", 2, 8)]),
    "three_layers": ParameterLayout.of([("w0", "b0", 16, 5), ("w1", "b1", 16, 16), ("w2", "b2", 3, 16)]),
}


def push_names(shader) -> list[str]:
    return [p.name for p in shader.push_constants]


def unpack(shader, data: bytes) -> dict:
    """Push constant bytes back into values by name."""
    return {p.name: struct.unpack_from("<I" if p.type == "u32" else "<f", data, p.offset)[0]
            for p in shader.push_constants}


@pytest.mark.parametrize("blocked", [False, True])
@pytest.mark.parametrize("adds_partials", [False, True])
@pytest.mark.parametrize("skip_nonfinite", [False, True])
@pytest.mark.parametrize("working_dtype", ["f32", "f16"])
@pytest.mark.parametrize("kind, slots", [("adam", 2), ("sgd", 1)])
def test_optimizer_shaders_are_valid(kind, slots, working_dtype, skip_nonfinite, adds_partials, blocked, tmp_path):
    from coopnn.shaders.training.step_state import REDUCE_WIDTH

    shader = optimizer_shader(kind, working_dtype, skip_nonfinite, 2000, adds_partials, blocked)
    spirv_val(shader.spirv, tmp_path)
    # the schedule, then the step end's loss sums and history, then the blocked copy's index and the copy
    assert shader.binding_count == 4 + slots + 3 + 2 * blocked and shader.workgroup_size == (REDUCE_WIDTH, 1, 1)
    names = push_names(shader)
    assert names[:2] == ["count", "gradient_scale"]
    assert names[-2:] == ["terms", "chunks"] if adds_partials else names[-1] == "terms"
    assert shader.push_constant_size == 4 * len(shader.push_constants)
    assert ("shaderFloat16" in shader.features) == (working_dtype == "f16")
    assert {"vulkanMemoryModel", "vulkanMemoryModelDeviceScope"} <= shader.features


@pytest.mark.parametrize("name", LAYOUTS)
def test_tape_gradient_shader_is_valid(name, tmp_path):
    layout = LAYOUTS[name]
    shader = tape_gradient_shader(layout, TapeLayout(layout.layers), 1024)
    spirv_val(shader.spirv, tmp_path)
    # tape in, partials out; no status: the partial sums check the totals
    assert shader.binding_count == 2 and push_names(shader) == ["count", "batch", "capacity"]
    assert "vulkanMemoryModel" in shader.features


def test_loss_tile_shader_is_valid(tmp_path):
    from coopnn.shaders.training.step_state import REDUCE_WIDTH, loss_tile_shader

    shader = loss_tile_shader()
    spirv_val(shader.spirv, tmp_path)
    assert shader.binding_count == 2 and push_names(shader) == ["count", "batch"]
    assert shader.workgroup_size == (REDUCE_WIDTH, 1, 1)


def test_partial_sum_shader_is_valid(tmp_path):
    shader = partial_sum_shader()
    spirv_val(shader.spirv, tmp_path)
    assert shader.binding_count == 3 and push_names(shader) == ["count", "chunks"]


def test_pack_push_packs_by_name_in_declaration_order():
    shader = partial_sum_shader()
    assert shader.pack_push(chunks=3, count=70) == struct.pack("<II", 70, 3)


@pytest.mark.parametrize("values, message", [
    ({"count": 1}, r"missing \['chunks'\]"),
    ({"count": 1, "chunks": 2, "batch": 3}, r"unknown \['batch'\]"),
    ({"count": -1, "chunks": 2}, "count"),
    ({"count": 1.5, "chunks": 2}, "count"),
])
def test_pack_push_refuses_missing_unknown_and_unrepresentable_values(values, message):
    with pytest.raises(ValueError, match=message):
        partial_sum_shader().pack_push(**values)


def test_optimizer_values_for_adam_fold_the_bias_corrections_into_the_schedule():
    shader = optimizer_shader("adam", "f32", False)
    adam = Adam(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)
    values = unpack(shader, optimizer_push(shader, adam, 100, 0.5, terms=1))
    assert values["count"] == 100 and values["gradient_scale"] == 0.5
    assert values["one_minus_beta1"] == pytest.approx(0.2) and values["eps"] == pytest.approx(1e-6)
    first = SCHEDULE_ROWS - 2
    rows = schedule_rows(adam, first, 3)  # updates t = first + 1 .. first + 3, in order
    assert rows.dtype == np.float32 and rows.shape == (3, 2)
    for row, t in zip(rows, range(first + 1, first + 4)):
        assert row[0] == np.float32(0.01 / (1 - 0.8**t)) and row[1] == np.float32(math.sqrt(1 - 0.99**t))


def test_optimizer_schedule_for_sgd_seeds_momentum_on_the_first_update_only():
    shader = optimizer_shader("sgd", "f16", True)
    sgd = SGD(lr=0.1, momentum=0.9, nesterov=True)
    values = unpack(shader, optimizer_push(shader, sgd, 7, 1.0, terms=1))
    assert values["nesterov"] == 1 and values["one_minus_dampening"] == 1.0
    assert values["momentum"] == pytest.approx(0.9)
    assert schedule_rows(sgd, 0, 3)[:, 0].tolist() == [1.0, 0.0, 0.0]


def test_optimizer_push_refuses_the_wrong_shader():
    with pytest.raises(ValueError, match="unknown"):
        optimizer_push(optimizer_shader("adam", "f32", False), SGD(), 10, 1.0, terms=1)


@pytest.mark.parametrize("args", [("lamb", "f32", False), ("adam", "bf16", False)])
def test_optimizer_shader_refuses_unknown_kinds_and_dtypes(args):
    with pytest.raises(ValueError, match="must be one of"):
        optimizer_shader(*args)


PADDED_LAYOUTS = {
    "mlp_32": ParameterLayout.of([("w0", "b0", 64, 32), ("w1", "b1", 64, 64), ("w2", "b2", 16, 64)]),
    "odd_rows": ParameterLayout.of([("w0", "b0", 24, 8), ("w1", "b1", 8, 24)]),
    "wide": ParameterLayout.of([("w0", "b0", 128, 136), ("w1", "b1", 8, 128)]),
}


@pytest.mark.parametrize("name", sorted(PADDED_LAYOUTS))
def test_coopmat_gradient_shaders_are_valid(name, tmp_path):
    from coopnn.shaders.training.coopmat_blocks import TILE, layer_blocks, task_count
    from coopnn.shaders.training.coopmat_gradients import coopmat_gradient_shader

    layout = PADDED_LAYOUTS[name]
    for deltas in DELTA_LAYOUTS:
        shader = coopmat_gradient_shader(layout, TapeLayout(layout.layers, deltas))
        spirv_val(shader.spirv, tmp_path)
    # tape in, partials out, the status flagged where a partial is not finite
    assert shader.binding_count == 3 and shader.workgroup_size == (32, 1, 1)
    assert {"cooperativeMatrix", "vulkanMemoryModelDeviceScope"} <= shader.features
    blocks = layer_blocks(layout)
    assert task_count(layout) == sum(b.count for b in blocks)
    for layer, b in zip(layout.layers, blocks):
        # every tile of the layer in exactly one block, no block wholly outside it
        assert b.row_blocks * b.row_tiles >= -(-layer.rows // TILE) > (b.row_blocks - 1) * b.row_tiles
        assert b.column_blocks * b.column_tiles >= -(-layer.cols // TILE) > (b.column_blocks - 1) * b.column_tiles
    assert [b.first for b in blocks] == [sum(x.count for x in blocks[:i]) for i in range(len(blocks))]


@pytest.mark.parametrize("name, staged", [("mlp_32", False), ("odd_rows", False), ("wide", True)])
def test_coopmat_gradient_blocks_of_four_row_tiles_stage_the_tape_in_workgroup_memory(name, staged):
    from coopnn.shaders.training.coopmat_gradients import coopmat_gradient_shader

    layout = PADDED_LAYOUTS[name]
    for deltas in DELTA_LAYOUTS:
        spirv = coopmat_gradient_shader(layout, TapeLayout(layout.layers, deltas)).spirv
        assert (b"staged_inputs" in spirv) == staged and (b"words_0" in spirv) == staged


def test_coopmat_gradient_blocks_take_four_row_tiles_in_layers_of_128_rows_or_more():
    from coopnn.shaders.training.coopmat_blocks import layer_blocks

    layout = ParameterLayout.of([("w0", "b0", 128, 64), ("w1", "b1", 144, 128), ("w2", "b2", 64, 128),
                                 ("w3", "b3", 16, 64)])
    assert [(b.row_tiles, b.column_tiles, b.row_blocks, b.column_blocks) for b in layer_blocks(layout)] == [
        (4, 4, 2, 1), (4, 4, 3, 2), (2, 4, 2, 2), (1, 4, 1, 1)]
    assert [b.row_tiles for b in layer_blocks(layout, row_tiles=2)] == [2, 2, 2, 1]


@pytest.mark.parametrize("name", sorted(PADDED_LAYOUTS))
def test_coopmat_gradient_chunks_fill_the_device_and_fit_their_partials(name):
    from coopnn.shaders.training import coopmat_blocks as cg

    layout = PADDED_LAYOUTS[name]
    tasks = cg.task_count(layout)
    for capacity in (32, 4096, 1 << 16, 1 << 18, 1 << 21):
        counts = {32, capacity, capacity // 3 // 32 * 32 or 32, capacity // 2 + 32}
        for count in (c for c in counts if c <= capacity):
            tiles, chunks = cg.chunking(layout, count)
            assert cg.MIN_CHUNK_TILES <= tiles <= cg.MAX_CHUNK_TILES
            assert (chunks - 1) * tiles * cg.TILE < count <= chunks * tiles * cg.TILE
            # halved only while too few subgroups: twice the tiles would have given fewer than the target
            if tiles < cg.MAX_CHUNK_TILES:
                assert -(-count // (2 * tiles * cg.TILE)) * tasks < cg.TARGET_SUBGROUPS
            assert chunks <= cg.most_chunks(layout, capacity)


@pytest.mark.parametrize("name", sorted(PADDED_LAYOUTS))
def test_coopvec_gradient_shaders_are_valid(name, tmp_path):
    from coopnn.backends.coopvec.coopvec_gradients import coopvec_gradient_shader, row_starts

    layout = PADDED_LAYOUTS[name]
    shader = coopvec_gradient_shader(layout, TapeLayout(layout.layers))
    spirv_val(shader.spirv, tmp_path)
    assert shader.binding_count == 3 and "cooperativeVector" in shader.features
    assert all(start % 32 == 0 for start in row_starts(layout))


def test_optimizer_shader_slots_are_the_optimizers():
    from coopnn.shaders.training.optimizer import SLOTS
    from coopnn.train.optim import OPTIMIZERS

    assert SLOTS == {name: cls.slots for name, cls in OPTIMIZERS.items()}
