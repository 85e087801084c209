"""When the coopmat2 backend is offered, checked on made-up device descriptions (the H100's, and the same with a piece
missing): the features, the workgroup size, the flexible-dimension shape for the tile, the largest dimension."""

from __future__ import annotations

from dataclasses import replace

import pytest

from coopnn.backends.coopmat2.backend import Coopmat2Backend, granularity, tile_shape
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.targets.tile_plan import plan_tiles
from tests.backends.tile_devices import FEATURES, FLEXIBLE_SHAPES, HALVES, h100, shape
from tests.conftest import ROOT

BACKEND = Coopmat2Backend()


def _plan(stem: str):
    return plan_tiles(lower(optimize(import_model(ROOT / "models" / f"{stem}.onnx"))), "coopmat2")


def test_the_h100_is_taken_with_tiles_of_64_at_granularity_16():
    info = h100()
    assert BACKEND.device_needs(info) is None
    assert tile_shape(info).workgroup_invocations == 64 and granularity(info) == 16
    assert BACKEND.program_needs(info, _plan("mlp_64_128x4_16")) is None


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
    others = tuple(s for s in FLEXIBLE_SHAPES if s.workgroup_invocations != 64)
    assert BACKEND.device_needs(h100(flexible_shapes=others)) == (
        "H100 lists no flexible-dimension float16 x float16 + float32 matrices (with float16 accumulators of the same "
        "granularity) at workgroup scope for 64 invocations")
    for types in (HALVES, "FLOAT16 FLOAT16 FLOAT32 FLOAT32"):  # both are declared: either alone is not enough
        alone = others + (shape(16, 16, 16, types, "WORKGROUP", 64),)
        assert "lists no flexible-dimension" in BACKEND.device_needs(h100(flexible_shapes=alone))
    assert "at most 32 invocations" in BACKEND.device_needs(h100(workgroup_scope_max_workgroup_size=32))


def test_padding_follows_the_shapes_granularity():
    coarse = tuple(s for s in FLEXIBLE_SHAPES if s.workgroup_invocations != 64) + (
        shape(16, 32, 16, scope="WORKGROUP", invocations=64), shape(16, 32, 16, HALVES, "WORKGROUP", 64))
    assert granularity(h100(flexible_shapes=coarse)) == 32


def test_matrices_beyond_the_largest_flexible_dimension_are_refused():
    info = h100(flexible_dimensions_max_dimension=96)
    assert BACKEND.program_needs(info, _plan("mlp_3_64x2_3")) is None
    assert BACKEND.program_needs(info, _plan("mlp_64_128x4_16")) == (
        "the model needs matrices of 128 rows or columns; H100's flexible dimensions reach 96")
