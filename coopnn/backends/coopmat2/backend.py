"""The coopmat2 backend's record: the coopmat2 target on a device with VK_NV_cooperative_matrix2.

The device must offer workgroup-scope matrices with flexible dimensions, conversions, per-element operations and
tensor addressing (`FEATURES`), and list a flexible-dimension shape of float16 x float16 + float32 at workgroup scope
for the tile's invocations (vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV) whose granularity
divides the tile (the first of the target's `TILES` it takes); feature dimensions are padded to its N and K
granularity, and no matrix may exceed the device's largest flexible dimension. Weights are float16 or blocks of q8_0
or q4_0 (row-major, in one buffer); the block formats need block loads, buffer device addresses and 16-bit integers as
well (`decode.FEATURES`), and take the DecodeVectorFunc where the device offers VK_NV_cooperative_matrix_decode_vector's
feature.
"""

from __future__ import annotations

import math

from coopnn.backends.tile_backend import (COMPUTE_STAGE_BIT, TileBackend, float16_shapes, missing_features,
                                          with_float16_accumulators)
from coopnn.backends.coopmat2 import decode
from coopnn.backends.coopmat2.target import FEATURES, TILES, Coopmat2Target, features, pack_program
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.q4_0 import FORMAT as Q4_0
from coopnn.layouts.formats.q8_0 import FORMAT as Q8_0
from coopnn.layouts.pack import WeightImage, align_up
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.shaders.targets.base import Binary
from coopnn.shaders.targets.tile_plan import TilePlan


def tile_shape(info):
    """The flexible-dimension shape the tile kernel uses on this device, or None: for the first of `TILES` that the
    device's work-groups and workgroup-scope matrices take, a float16 x float16 + float32 shape at workgroup scope for
    that many invocations, its M granularity dividing the tile, with float16 accumulators of the same granularity
    listed too. Its `workgroup_invocations` is the tile."""
    listed = info.cooperative_matrix2.flexible_shapes
    for tile in _tiles_taken(info):
        fitting = [s for s in float16_shapes(listed, "WORKGROUP")
                   if s.workgroup_invocations == tile and tile % s.m == 0]
        fitting = with_float16_accumulators(fitting, listed, "WORKGROUP")
        if fitting:
            return fitting[0]
    return None


def _tiles_taken(info) -> list[int]:
    """The TILES a work-group of this device can hold at workgroup scope (a tile is a matrix's rows too), largest
    first."""
    limits, matrices2 = info.limits, info.cooperative_matrix2
    largest = min(matrices2.workgroup_scope_max_workgroup_size, matrices2.flexible_dimensions_max_dimension,
                  limits.max_compute_work_group_invocations, limits.max_compute_work_group_size[0])
    return [tile for tile in TILES if tile <= largest]


def tile(info) -> int:
    """Samples per work-group (one per invocation) on this device."""
    return tile_shape(info).workgroup_invocations


def granularity(info) -> int:
    """What feature dimensions are padded to on this device: a layer's width is the N of one product and the K of
    the next."""
    shape = tile_shape(info)
    return math.lcm(shape.n, shape.k)


def _device_needs(info) -> str | None:
    matrices, matrices2 = info.cooperative_matrix, info.cooperative_matrix2
    if matrices is None or not matrices.cooperative_matrix:
        return f"{info.name} lacks VK_KHR_cooperative_matrix"
    if matrices2 is None:
        return f"{info.name} lacks VK_NV_cooperative_matrix2"
    if not matrices.supported_stages & COMPUTE_STAGE_BIT:
        return f"{info.name} offers cooperative matrices outside compute shaders only"
    missing = missing_features(info, FEATURES)
    if missing:
        return missing
    if not _tiles_taken(info):
        return (f"{info.name} takes workgroup-scope matrices in work-groups of at most "
                f"{matrices2.workgroup_scope_max_workgroup_size} invocations; the tile kernel needs {TILES[-1]}")
    if tile_shape(info) is None:
        counts = " or ".join(map(str, _tiles_taken(info)))
        return (f"{info.name} lists no flexible-dimension float16 x float16 + float32 matrices (with float16 "
                f"accumulators of the same granularity) at workgroup scope for {counts} invocations")
    return None


class Coopmat2Backend(TileBackend):
    name = "coopmat2"
    priority = 16
    description = ("cooperative matrix 2 (VK_NV_cooperative_matrix2): a work-group carries a tile of samples "
                   "through every layer on tensor cores, float16 weights loaded through tensor layouts")
    target = Coopmat2Target()
    formats = (FP16, Q8_0, Q4_0)
    device_features = features(Q8_0, decode_vector=True)

    def device_needs(self, info) -> str | None:
        return _device_needs(info)

    def format_needs(self, info, weights: WeightFormat) -> str | None:
        return missing_features(info, features(weights))

    def program_needs(self, info, plan: TilePlan) -> str | None:
        step = granularity(info)
        largest = max([tile(info)] + [align_up(s.width, step) for s in plan.stages])
        limit = info.cooperative_matrix2.flexible_dimensions_max_dimension
        if largest > limit:
            return (f"the model needs matrices of {largest} rows or columns; {info.name}'s flexible dimensions reach "
                    f"{limit}")
        if plan.input_stage:  # its float16 rows wait in workgroup memory for the first load
            staged = 2 * tile(info) * plan.stages[0].width
            available = (info.limits.max_compute_shared_memory_size
                         - info.cooperative_matrix2.workgroup_scope_reserved_shared_memory)
            if staged > available:
                return (f"the model's input stage keeps {staged} bytes of encoded rows a tile in workgroup memory; "
                        f"{info.name} has {available} bytes beside its matrices")
        return None

    def pack_for(self, info, program: KernelProgram, weights: WeightFormat) -> WeightImage:
        return pack_program(program, weights)

    def compile_for(self, info, program: KernelProgram, weights: WeightFormat, packed: WeightImage) -> Binary:
        vector = weights.blocks is not None and bool(info.features.get(decode.DECODE_VECTOR_FEATURE))
        return self.target.compile(program, weights, tile(info), granularity=granularity(info), packed=packed,
                                   decode_vector=vector)
