"""Made-up device descriptions for the cooperative-matrix tile backends' checks: the H100's as
/work/shared/gpu/h100-capabilities.txt lists it (KHR shapes, cooperative-matrix-2 features, limits and
flexible-dimension shapes), with any part replaced."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from coopnn.runtime.vk.device_info import (CooperativeMatrix2Support, CooperativeMatrixShape,
                                           CooperativeMatrixSupport, SubgroupInfo)
from coopnn.runtime.vk.nv_ffi import ComponentType, Scope

MATRIX2_FEATURES = ("cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions",
                    "cooperativeMatrixReductions", "cooperativeMatrixConversions",
                    "cooperativeMatrixPerElementOperations", "cooperativeMatrixTensorAddressing",
                    "cooperativeMatrixBlockLoads")
FEATURES = ("cooperativeMatrix", "shaderFloat16", "storageBuffer16BitAccess", "vulkanMemoryModel", "bufferDeviceAddress",
            "shaderInt16") + MATRIX2_FEATURES


def shape(m: int, n: int, k: int, types: str = "FLOAT16 FLOAT16 FLOAT32 FLOAT32", scope: str = "SUBGROUP",
          invocations: int = 0) -> CooperativeMatrixShape:
    a, b, c, r = (ComponentType[t] for t in types.split())
    return CooperativeMatrixShape(m, n, k, a, b, c, r, False, Scope[scope], invocations)


HALVES = "FLOAT16 FLOAT16 FLOAT16 FLOAT16"  # float16 accumulators
KHR_SHAPES = (shape(16, 16, 16, HALVES), shape(16, 8, 16, HALVES), shape(16, 8, 8, HALVES), shape(16, 16, 16),
              shape(16, 8, 16), shape(16, 8, 8), shape(16, 16, 32, "SINT8 SINT8 SINT32 SINT32"))
FLEXIBLE_SHAPES = tuple(shape(*granularity, types, scope, invocations)
                        for granularity, scope, invocations in (((16, 16, 16), "SUBGROUP", 0),
                                                                ((16, 16, 16), "WORKGROUP", 32),
                                                                ((16, 16, 16), "WORKGROUP", 64),
                                                                ((32, 16, 16), "WORKGROUP", 128),
                                                                ((32, 32, 16), "WORKGROUP", 256))
                        for types in (HALVES, "FLOAT16 FLOAT16 FLOAT32 FLOAT32"))


def h100(*, features=FEATURES, khr_shapes=KHR_SHAPES, flexible_shapes=FLEXIBLE_SHAPES, shared_memory=49152,
         matrix2: bool = True, device_type: str = "discrete", invocations: int = 1024,
         group_size: tuple[int, int, int] = (1024, 1024, 64), **matrix2_limits) -> SimpleNamespace:
    """What the tile backends read of a device: the H100's unless told otherwise (`features` may name more than
    it reports, cooperativeMatrixDecodeVector say)."""
    flags = {name: name in features for name in (*FEATURES, *features)}
    matrix = CooperativeMatrixSupport(True, True, 0x20, tuple(khr_shapes))
    support2 = CooperativeMatrix2Support({n: flags[n] for n in MATRIX2_FEATURES}, 256, 1024, 8192,
                                         tuple(flexible_shapes))
    return SimpleNamespace(name="H100", device_type=device_type, features=flags, cooperative_matrix=matrix,
                           cooperative_matrix2=replace(support2, **matrix2_limits) if matrix2 else None,
                           subgroup=SubgroupInfo(32, 32, 32, 0x3FFF, 0xFF),
                           limits=SimpleNamespace(max_compute_shared_memory_size=shared_memory,
                                                  max_compute_work_group_invocations=invocations,
                                                  max_compute_work_group_size=group_size))
