"""When the coopmat2 backend is offered, checked on made-up device descriptions (the H100's, and the same with a piece
missing): the features, the workgroup size, the flexible-dimension shape for the tile, the largest dimension."""

from __future__ import annotations

from dataclasses import replace

import pytest

from coopnn.backends.coopmat2.backend import Coopmat2Backend, granularity, tile, tile_shape
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.targets.tile_plan import plan_tiles
from tests.backends.tile_devices import FEATURES, FLEXIBLE_SHAPES, HALVES, h100, shape
from tests.conftest import ROOT

BACKEND = Coopmat2Backend()


def _plan(stem: str):
    return plan_tiles(lower(optimize(import_model(ROOT / "models" / f"{stem}.onnx"))), "coopmat2")


def test_the_h100_is_taken_with_tiles_of_128_at_granularity_16():
    info = h100()
    assert BACKEND.device_needs(info) is None
    assert (tile_shape(info).m, tile_shape(info).n, tile_shape(info).k) == (32, 16, 16)
    assert tile(info) == 128 and granularity(info) == 16
    assert BACKEND.program_needs(info, _plan("mlp_64_128x4_16")) is None


@pytest.mark.parametrize("limits", [{"invocations": 64}, {"group_size": (64, 64, 64)},
                                    {"workgroup_scope_max_workgroup_size": 64}])
def test_tiles_of_64_where_the_device_holds_no_work_group_of_128(limits):
    info = h100(**limits)
    assert BACKEND.device_needs(info) is None
    assert tile(info) == 64 and granularity(info) == 16


def test_tiles_of_64_where_no_shape_is_listed_for_128_invocations():
    info = h100(flexible_shapes=tuple(s for s in FLEXIBLE_SHAPES if s.workgroup_invocations != 128))
    assert tile(info) == 64


def test_a_device_without_cooperative_matrices_is_refused():
    info = h100()
    info.cooperative_matrix = replace(info.cooperative_matrix, cooperative_matrix=False)
    assert BACKEND.device_needs(info) == "H100 lacks VK_KHR_cooperative_matrix"
    assert BACKEND.device_needs(h100(matrix2=False)) == "H100 lacks VK_NV_cooperative_matrix2"


@pytest.mark.parametrize("feature", ["cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions",
                                     "cooperativeMatrixConversions", "cooperativeMatrixPerElementOperations",
                                     "cooperativeMatrixTensorAddressing", "shaderFloat16"])
def test_each_feature_the_kernel_uses_is_needed(feature):
    info = h100(features=tuple(f for f in FEATURES if f != feature))
    assert BACKEND.device_needs(info) == f"H100 lacks the features {feature}"


def test_reductions_and_block_loads_are_not_needed_for_float16_weights():
    unused = ("cooperativeMatrixReductions", "cooperativeMatrixBlockLoads")
    assert BACKEND.device_needs(h100(features=tuple(f for f in FEATURES if f not in unused))) is None


def test_the_tile_needs_a_workgroup_shape_for_its_invocations():
    others = tuple(s for s in FLEXIBLE_SHAPES if s.workgroup_invocations not in (64, 128))
    assert BACKEND.device_needs(h100(flexible_shapes=others)) == (
        "H100 lists no flexible-dimension float16 x float16 + float32 matrices (with float16 accumulators of the same "
        "granularity) at workgroup scope for 128 or 64 invocations")
    for types in (HALVES, "FLOAT16 FLOAT16 FLOAT32 FLOAT32"):  # both are declared: either alone is not enough
        alone = others + (shape(16, 16, 16, types, "WORKGROUP", 64),)
        assert "lists no flexible-dimension" in BACKEND.device_needs(h100(flexible_shapes=alone))
    assert BACKEND.device_needs(h100(workgroup_scope_max_workgroup_size=32)) == (
        "H100 takes workgroup-scope matrices in work-groups of at most 32 invocations; the tile kernel needs 64")


def test_a_shape_whose_rows_do_not_divide_the_tile_is_not_taken():
    others = tuple(s for s in FLEXIBLE_SHAPES if s.workgroup_invocations != 128)
    coarse = others + tuple(shape(48, 16, 16, types, "WORKGROUP", 128)
                            for types in (HALVES, "FLOAT16 FLOAT16 FLOAT32 FLOAT32"))
    assert tile(h100(flexible_shapes=coarse)) == 64


def test_padding_follows_the_shapes_granularity():
    coarse = tuple(s for s in FLEXIBLE_SHAPES if s.workgroup_invocations != 128) + (
        shape(32, 32, 16, scope="WORKGROUP", invocations=128), shape(32, 32, 16, HALVES, "WORKGROUP", 128))
    assert granularity(h100(flexible_shapes=coarse)) == 32


def test_matrices_beyond_the_largest_flexible_dimension_are_refused():
    info = h100(flexible_dimensions_max_dimension=96)
    assert BACKEND.program_needs(info, _plan("mlp_3_64x2_3")) is None
    assert BACKEND.program_needs(info, _plan("mlp_64_128x4_16")) == (
        "the model needs matrices of 128 rows or columns; H100's flexible dimensions reach 96")
