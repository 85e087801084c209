"""The second FFI's declarations against the Vulkan registry's layouts (x86-64 / LP64), no device needed."""

from __future__ import annotations

import pytest

from coopnn.runtime.vk import nv_ffi

ffi = nv_ffi.ffi

# (struct, size, {member: offset}) worked out from vulkan_core.h with C layout rules: 4-byte enums and VkBool32,
# 8-byte pointers, size_t, VkDeviceAddress and unions of them.
LAYOUTS = [
    ("VkPhysicalDeviceCooperativeVectorFeaturesNV", 24, {"cooperativeVector": 16, "cooperativeVectorTraining": 20}),
    ("VkPhysicalDeviceCooperativeVectorPropertiesNV", 32,
     {"cooperativeVectorSupportedStages": 16, "cooperativeVectorTrainingFloat16Accumulation": 20,
      "cooperativeVectorTrainingFloat32Accumulation": 24, "maxCooperativeVectorComponents": 28}),
    ("VkCooperativeVectorPropertiesNV", 40,
     {"inputType": 16, "inputInterpretation": 20, "matrixInterpretation": 24, "biasInterpretation": 28,
      "resultType": 32, "transpose": 36}),
    ("VkConvertCooperativeVectorMatrixInfoNV", 96,
     {"srcSize": 16, "srcData": 24, "pDstSize": 32, "dstData": 40, "srcComponentType": 48, "dstComponentType": 52,
      "numRows": 56, "numColumns": 60, "srcLayout": 64, "srcStride": 72, "dstLayout": 80, "dstStride": 88}),
    ("VkCooperativeMatrixFlexibleDimensionsPropertiesNV", 56,
     {"MGranularity": 16, "NGranularity": 20, "KGranularity": 24, "AType": 28, "BType": 32, "CType": 36,
      "ResultType": 40, "saturatingAccumulation": 44, "scope": 48, "workgroupInvocations": 52}),
    ("VkPhysicalDeviceCooperativeMatrix2FeaturesNV", 48,
     {"cooperativeMatrixWorkgroupScope": 16, "cooperativeMatrixBlockLoads": 40}),
    ("VkPhysicalDeviceCooperativeMatrix2PropertiesNV", 32,
     {"cooperativeMatrixWorkgroupScopeMaxWorkgroupSize": 16,
      "cooperativeMatrixWorkgroupScopeReservedSharedMemory": 24}),
    ("VkPhysicalDeviceCooperativeMatrixDecodeVectorFeaturesNV", 24, {"cooperativeMatrixDecodeVector": 16}),
    ("VkPhysicalDeviceShaderAtomicFloat16VectorFeaturesNV", 24, {"shaderFloat16VectorAtomics": 16}),
]


@pytest.mark.skipif(ffi.sizeof("void*") != 8, reason="layouts worked out for 64-bit pointers")
@pytest.mark.parametrize("name, size, offsets", LAYOUTS, ids=[layout[0] for layout in LAYOUTS])
def test_struct_layouts_match_the_registry(name, size, offsets):
    assert ffi.sizeof(name) == size
    for member, offset in offsets.items():
        assert ffi.offsetof(name, member) == offset, member
    assert ffi.offsetof(name, "sType") == 0 and ffi.offsetof(name, "pNext") == 8


def test_enum_values_are_the_registry_values():
    assert nv_ffi.StructureType.PHYSICAL_DEVICE_COOPERATIVE_VECTOR_FEATURES_NV == 1000491000
    assert nv_ffi.StructureType.CONVERT_COOPERATIVE_VECTOR_MATRIX_INFO_NV == 1000491004
    assert nv_ffi.StructureType.PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV == 1000593002
    assert nv_ffi.StructureType.PHYSICAL_DEVICE_COOPERATIVE_MATRIX_DECODE_VECTOR_FEATURES_NV == 1000689000
    assert nv_ffi.StructureType.PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT16_VECTOR_FEATURES_NV == 1000563000
    assert nv_ffi.ComponentType.FLOAT8_E4M3 == 1000491002 and nv_ffi.ComponentType.SINT8_PACKED == 1000491000
    assert nv_ffi.MatrixLayout.INFERENCING_OPTIMAL == 2 and nv_ffi.MatrixLayout.TRAINING_OPTIMAL == 3

