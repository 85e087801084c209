"""When the coopmat backend is offered, checked on made-up device descriptions: the H100's, one that lists only
KHR cooperative matrices (as AMD's and Intel's drivers do), and those with a piece missing; the matrix shape it
picks and the workgroup memory a model needs."""

from __future__ import annotations

from dataclasses import replace

from coopnn.backends.coopmat.backend import CoopmatBackend, matrix_shape, workgroup_invocations
from coopnn.backends.coopmat.target import Shape
from coopnn.backends.coopmat2.backend import Coopmat2Backend
from coopnn.runtime.vk.device_info import SubgroupInfo
from coopnn.shaders.targets.tile_plan import plan_tiles
from tests.backends.tile_devices import FEATURES, HALVES, MATRIX2_FEATURES, h100, shape
from tests.shaders.targets.test_tile_plan import zoo_program

BACKEND = CoopmatBackend()


def _plan(stem: str):
    return plan_tiles(zoo_program(stem), "coopmat")


def test_the_h100_is_taken_with_16x16x16_matrices():
    info = h100()
    assert BACKEND.device_needs(info) is None and matrix_shape(info) == Shape(16, 16, 16)


def test_a_device_with_only_khr_cooperative_matrices_is_taken_by_coopmat_alone():
    info = h100(features=tuple(f for f in FEATURES if f not in MATRIX2_FEATURES), matrix2=False,
                khr_shapes=(shape(16, 16, 16), shape(16, 16, 16, HALVES)))
    assert BACKEND.device_needs(info) is None
    assert Coopmat2Backend().device_needs(info) == "H100 lacks VK_NV_cooperative_matrix2"


def test_another_listed_shape_is_used_where_16x16x16_is_not():
    listed = (shape(16, 8, 16), shape(16, 8, 16, HALVES), shape(16, 16, 16, HALVES))
    assert matrix_shape(h100(khr_shapes=listed)) == Shape(16, 8, 16)


def test_a_shape_needs_its_float16_accumulators_listed_too():
    """Every cooperative-matrix type a shader declares must match a listed matrix; the kernel declares float16 M x N
    accumulators (bias tiles, rounded results) besides the product's types."""
    assert matrix_shape(h100(khr_shapes=(shape(16, 16, 16), shape(16, 8, 16, HALVES)))) is None


def test_what_a_device_must_offer():
    info = h100()
    info.cooperative_matrix = None
    assert BACKEND.device_needs(info) == "H100 lacks VK_KHR_cooperative_matrix"
    info = h100()
    info.cooperative_matrix = replace(info.cooperative_matrix, supported_stages=0x1)
    assert BACKEND.device_needs(info) == "H100 offers cooperative matrices outside compute shaders only"
    assert BACKEND.device_needs(h100(features=("cooperativeMatrix", "vulkanMemoryModel"))) == (
        "H100 lacks the features shaderFloat16, storageBuffer16BitAccess")
    info = h100()
    info.subgroup = SubgroupInfo(32, 32, 32, 0x20, 0x0)
    assert BACKEND.device_needs(info) == "H100 lacks the basic subgroup operations in compute shaders"
    integer_only = h100(khr_shapes=(shape(16, 16, 32, "SINT8 SINT8 SINT32 SINT32"), shape(16, 16, 16, HALVES)))
    assert BACKEND.device_needs(integer_only) == (
        "H100 lists no subgroup-scope float16 x float16 + float32 cooperative-matrix shape (with float16 accumulators "
        "of its M x N) the tile kernel can use (tiles of 64 samples)")


def test_the_widest_layer_must_fit_workgroup_memory():
    wide, narrow = _plan("mlp_64_128x4_16"), _plan("mlp_3_64x2_3")
    small = h100(shared_memory=20480)
    assert BACKEND.program_needs(small, narrow) is None  # 2 buffers x 64 rows x (64 + 8) halves: 18,432 bytes
    assert BACKEND.program_needs(small, wide) == (
        "the model's widest layer needs 34816 bytes of workgroup memory for tiles of 64 samples; H100 has 20480")
    assert BACKEND.program_needs(h100(), wide) is None


def test_work_groups_of_256_invocations_where_the_device_allows_them():
    assert workgroup_invocations(h100()) == 256
    assert workgroup_invocations(h100(invocations=128)) == 128  # the least Vulkan guarantees
    assert workgroup_invocations(h100(group_size=(1024, 2, 64))) == 128  # 64 samples x 2 rows
