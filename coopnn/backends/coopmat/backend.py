"""The coopmat backend's record: the coopmat target on any device with VK_KHR_cooperative_matrix (AMD, Intel and
NVIDIA drivers implement it).

The device must list a subgroup-scope float16 x float16 + float32 shape
(vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR; 16 x 16 x 16 where listed, else the first whose N and K divide
each other), offer the basic subgroup operations in compute shaders (the kernel shares tiles out by SubgroupId), and
hold the kernel's two float16 activation buffers in its workgroup memory. Weights are float16, padded to whole
tiles.
"""

from __future__ import annotations

from coopnn.backends.tile_backend import (COMPUTE_STAGE_BIT, TileBackend, float16_shapes, missing_features,
                                          with_float16_accumulators)
from coopnn.backends.coopmat.packing import pack_tiles
from coopnn.backends.coopmat.target import (FEATURES, TILE, WORKGROUP_INVOCATIONS, CoopmatTarget, Shape,
                                            shared_halves)
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import WeightImage
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.shaders.targets.base import Binary
from coopnn.shaders.targets.tile_plan import TilePlan, plan_tiles

SUBGROUP_BASIC_BIT = 0x1  # VK_SUBGROUP_FEATURE_BASIC_BIT


def matrix_shape(info) -> Shape | None:
    """The shape the kernel uses on this device: 16 x 16 x 16 where listed, else the first listed that fits (with
    float16 accumulators of its M x N listed too: the bias tiles and the float16 results)."""
    shapes = info.cooperative_matrix.shapes
    products = with_float16_accumulators(float16_shapes(shapes, "SUBGROUP"), shapes, "SUBGROUP")
    listed = [Shape(s.m, s.n, s.k) for s in products]
    fitting = [s for s in listed if s.granularity % s.n == 0 and s.granularity % s.k == 0 and TILE % s.m == 0]
    if Shape() in fitting:
        return Shape()
    return fitting[0] if fitting else None


def workgroup_invocations(info) -> int:
    """The kernel's invocations per work-group on this device: WORKGROUP_INVOCATIONS where its limits allow (a
    work-group of TILE x rows), else as many as they do (Vulkan guarantees 128)."""
    limits = info.limits
    return min(WORKGROUP_INVOCATIONS, limits.max_compute_work_group_invocations,
               TILE * limits.max_compute_work_group_size[1])


def _device_needs(info) -> str | None:
    matrices = info.cooperative_matrix
    if matrices is None or not matrices.cooperative_matrix:
        return f"{info.name} lacks VK_KHR_cooperative_matrix"
    if not matrices.supported_stages & COMPUTE_STAGE_BIT:
        return f"{info.name} offers cooperative matrices outside compute shaders only"
    missing = missing_features(info, FEATURES)
    if missing:
        return missing
    subgroup = info.subgroup
    if not (subgroup.supported_stages & COMPUTE_STAGE_BIT and subgroup.supported_operations & SUBGROUP_BASIC_BIT):
        return f"{info.name} lacks the basic subgroup operations in compute shaders"
    if matrix_shape(info) is None:
        return (f"{info.name} lists no subgroup-scope float16 x float16 + float32 cooperative-matrix shape (with "
                f"float16 accumulators of its M x N) the tile kernel can use (tiles of {TILE} samples)")
    return None


class CoopmatBackend(TileBackend):
    name = "coopmat"
    priority = 14
    description = ("cooperative matrices (VK_KHR_cooperative_matrix, any vendor): a work-group carries a tile of "
                   "samples through every layer on tensor cores, float16 weights")
    target = CoopmatTarget()
    device_features = FEATURES

    def device_needs(self, info) -> str | None:
        return _device_needs(info)

    def program_needs(self, info, plan: TilePlan) -> str | None:
        needed = 2 * shared_halves(plan, TILE, matrix_shape(info))
        limit = info.limits.max_compute_shared_memory_size
        if needed > limit:
            return (f"the model's widest layer needs {needed} bytes of workgroup memory for tiles of {TILE} samples; "
                    f"{info.name} has {limit}")
        return None

    def pack_for(self, info, program: KernelProgram, weights: WeightFormat) -> WeightImage:
        shape = matrix_shape(info)
        return pack_tiles(plan_tiles(program, self.name), weights, shape.granularity, shape.m)

    def compile_for(self, info, program: KernelProgram, weights: WeightFormat, packed: WeightImage) -> Binary:
        return self.target.compile(program, weights, TILE, shape=matrix_shape(info), packed=packed,
                                   invocations=workgroup_invocations(info))
