"""A second cffi FFI declaring VK_NV_cooperative_vector, VK_NV_cooperative_matrix2,
VK_NV_cooperative_matrix_decode_vector and VK_NV_shader_atomic_float16_vector, which pyvulkan lacks.

pyvulkan's FFI is precompiled from Vulkan 1.3.275 headers, which predate both extensions, so their structs and
function pointer types are declared here (in-line ABI mode, nothing compiled). Layouts, sType values and enum values are
copied from the Khronos registry's `vulkan_core.h` (Vulkan-Headers, VK_NV_COOPERATIVE_VECTOR_SPEC_VERSION 4,
VK_NV_COOPERATIVE_MATRIX_2_SPEC_VERSION 1; VK_NV_cooperative_matrix_decode_vector's feature struct, sType
1000689000, extension revision 1; VK_NV_shader_atomic_float16_vector's feature struct, sType 1000563000,
VK_NV_SHADER_ATOMIC_FLOAT16_VECTOR_SPEC_VERSION 1). Handles cross between the two FFIs as raw addresses: a pyvulkan handle or
struct becomes an integer with `address()` and is cast to this FFI's type, and back.

Only this module and the modules using these extensions import it; enum-typed fields are declared as int32_t (C enums
are int-sized on every ABI Vulkan supports) with the values in the IntEnums below.
"""

from __future__ import annotations

from enum import IntEnum
from types import ModuleType

import cffi

from coopnn.errors import BackendUnavailableError

COOPERATIVE_VECTOR_EXTENSION = "VK_NV_cooperative_vector"
COOPERATIVE_MATRIX_2_EXTENSION = "VK_NV_cooperative_matrix2"
COOPERATIVE_MATRIX_DECODE_VECTOR_EXTENSION = "VK_NV_cooperative_matrix_decode_vector"
ATOMIC_FLOAT16_VECTOR_EXTENSION = "VK_NV_shader_atomic_float16_vector"

CDEF = """
typedef uint32_t VkBool32;
typedef uint32_t VkFlags;
typedef VkFlags VkShaderStageFlags;
typedef uint64_t VkDeviceAddress;
typedef int32_t VkResult;
typedef int32_t VkStructureType;
typedef int32_t VkComponentTypeKHR;
typedef int32_t VkScopeKHR;
typedef int32_t VkCooperativeVectorMatrixLayoutNV;
typedef struct VkPhysicalDevice_T* VkPhysicalDevice;
typedef struct VkDevice_T* VkDevice;
typedef struct VkCommandBuffer_T* VkCommandBuffer;

typedef union VkDeviceOrHostAddressKHR {
    VkDeviceAddress deviceAddress;
    void*           hostAddress;
} VkDeviceOrHostAddressKHR;

typedef union VkDeviceOrHostAddressConstKHR {
    VkDeviceAddress deviceAddress;
    const void*     hostAddress;
} VkDeviceOrHostAddressConstKHR;

typedef struct VkPhysicalDeviceCooperativeVectorPropertiesNV {
    VkStructureType    sType;
    void*              pNext;
    VkShaderStageFlags cooperativeVectorSupportedStages;
    VkBool32           cooperativeVectorTrainingFloat16Accumulation;
    VkBool32           cooperativeVectorTrainingFloat32Accumulation;
    uint32_t           maxCooperativeVectorComponents;
} VkPhysicalDeviceCooperativeVectorPropertiesNV;

typedef struct VkPhysicalDeviceCooperativeVectorFeaturesNV {
    VkStructureType sType;
    void*           pNext;
    VkBool32        cooperativeVector;
    VkBool32        cooperativeVectorTraining;
} VkPhysicalDeviceCooperativeVectorFeaturesNV;

typedef struct VkCooperativeVectorPropertiesNV {
    VkStructureType    sType;
    void*              pNext;
    VkComponentTypeKHR inputType;
    VkComponentTypeKHR inputInterpretation;
    VkComponentTypeKHR matrixInterpretation;
    VkComponentTypeKHR biasInterpretation;
    VkComponentTypeKHR resultType;
    VkBool32           transpose;
} VkCooperativeVectorPropertiesNV;

typedef struct VkConvertCooperativeVectorMatrixInfoNV {
    VkStructureType                   sType;
    const void*                       pNext;
    size_t                            srcSize;
    VkDeviceOrHostAddressConstKHR     srcData;
    size_t*                           pDstSize;
    VkDeviceOrHostAddressKHR          dstData;
    VkComponentTypeKHR                srcComponentType;
    VkComponentTypeKHR                dstComponentType;
    uint32_t                          numRows;
    uint32_t                          numColumns;
    VkCooperativeVectorMatrixLayoutNV srcLayout;
    size_t                            srcStride;
    VkCooperativeVectorMatrixLayoutNV dstLayout;
    size_t                            dstStride;
} VkConvertCooperativeVectorMatrixInfoNV;

typedef VkResult (*PFN_vkGetPhysicalDeviceCooperativeVectorPropertiesNV)(
    VkPhysicalDevice physicalDevice, uint32_t* pPropertyCount, VkCooperativeVectorPropertiesNV* pProperties);
typedef VkResult (*PFN_vkConvertCooperativeVectorMatrixNV)(
    VkDevice device, const VkConvertCooperativeVectorMatrixInfoNV* pInfo);
typedef void (*PFN_vkCmdConvertCooperativeVectorMatrixNV)(
    VkCommandBuffer commandBuffer, uint32_t infoCount, const VkConvertCooperativeVectorMatrixInfoNV* pInfos);

typedef struct VkCooperativeMatrixFlexibleDimensionsPropertiesNV {
    VkStructureType    sType;
    void*              pNext;
    uint32_t           MGranularity;
    uint32_t           NGranularity;
    uint32_t           KGranularity;
    VkComponentTypeKHR AType;
    VkComponentTypeKHR BType;
    VkComponentTypeKHR CType;
    VkComponentTypeKHR ResultType;
    VkBool32           saturatingAccumulation;
    VkScopeKHR         scope;
    uint32_t           workgroupInvocations;
} VkCooperativeMatrixFlexibleDimensionsPropertiesNV;

typedef struct VkPhysicalDeviceCooperativeMatrix2FeaturesNV {
    VkStructureType sType;
    void*           pNext;
    VkBool32        cooperativeMatrixWorkgroupScope;
    VkBool32        cooperativeMatrixFlexibleDimensions;
    VkBool32        cooperativeMatrixReductions;
    VkBool32        cooperativeMatrixConversions;
    VkBool32        cooperativeMatrixPerElementOperations;
    VkBool32        cooperativeMatrixTensorAddressing;
    VkBool32        cooperativeMatrixBlockLoads;
} VkPhysicalDeviceCooperativeMatrix2FeaturesNV;

typedef struct VkPhysicalDeviceCooperativeMatrix2PropertiesNV {
    VkStructureType sType;
    void*           pNext;
    uint32_t        cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
    uint32_t        cooperativeMatrixFlexibleDimensionsMaxDimension;
    uint32_t        cooperativeMatrixWorkgroupScopeReservedSharedMemory;
} VkPhysicalDeviceCooperativeMatrix2PropertiesNV;

typedef struct VkPhysicalDeviceCooperativeMatrixDecodeVectorFeaturesNV {
    VkStructureType sType;
    void*           pNext;
    VkBool32        cooperativeMatrixDecodeVector;
} VkPhysicalDeviceCooperativeMatrixDecodeVectorFeaturesNV;

typedef struct VkPhysicalDeviceShaderAtomicFloat16VectorFeaturesNV {
    VkStructureType sType;
    void*           pNext;
    VkBool32        shaderFloat16VectorAtomics;
} VkPhysicalDeviceShaderAtomicFloat16VectorFeaturesNV;

typedef VkResult (*PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)(
    VkPhysicalDevice physicalDevice, uint32_t* pPropertyCount,
    VkCooperativeMatrixFlexibleDimensionsPropertiesNV* pProperties);
"""

ffi = cffi.FFI()
ffi.cdef(CDEF)


class StructureType(IntEnum):
    """VkStructureType values of the structs declared above."""

    PHYSICAL_DEVICE_COOPERATIVE_VECTOR_FEATURES_NV = 1000491000
    PHYSICAL_DEVICE_COOPERATIVE_VECTOR_PROPERTIES_NV = 1000491001
    COOPERATIVE_VECTOR_PROPERTIES_NV = 1000491002
    CONVERT_COOPERATIVE_VECTOR_MATRIX_INFO_NV = 1000491004
    PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV = 1000593000
    COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV = 1000593001
    PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV = 1000593002
    PHYSICAL_DEVICE_COOPERATIVE_MATRIX_DECODE_VECTOR_FEATURES_NV = 1000689000
    PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT16_VECTOR_FEATURES_NV = 1000563000


class ComponentType(IntEnum):
    """VkComponentTypeKHR, with the NV and EXT additions cooperative vectors use."""

    FLOAT16 = 0
    FLOAT32 = 1
    FLOAT64 = 2
    SINT8 = 3
    SINT16 = 4
    SINT32 = 5
    SINT64 = 6
    UINT8 = 7
    UINT16 = 8
    UINT32 = 9
    UINT64 = 10
    BFLOAT16 = 1000141000
    SINT8_PACKED = 1000491000
    UINT8_PACKED = 1000491001
    FLOAT8_E4M3 = 1000491002
    FLOAT8_E5M2 = 1000491003


class MatrixLayout(IntEnum):
    """VkCooperativeVectorMatrixLayoutNV."""

    ROW_MAJOR = 0
    COLUMN_MAJOR = 1
    INFERENCING_OPTIMAL = 2
    TRAINING_OPTIMAL = 3


class Scope(IntEnum):
    """VkScopeKHR."""

    DEVICE = 1
    WORKGROUP = 2
    SUBGROUP = 3
    QUEUE_FAMILY = 5


def address(ffi_of_value: cffi.FFI, value) -> int:
    """The address held by a pointer or handle cdata of either FFI."""
    return int(ffi_of_value.cast("uintptr_t", value))


def instance_function(vk: ModuleType, instance, name: str):
    """`name` as this FFI's PFN type, from vkGetInstanceProcAddr (for physical-device-level commands)."""
    return _as_function(vk, vk.lib.vkGetInstanceProcAddr(instance, name.encode()), name)


def device_function(vk: ModuleType, device, name: str):
    """`name` as this FFI's PFN type, from vkGetDeviceProcAddr (for device-level commands)."""
    return _as_function(vk, vk.lib.vkGetDeviceProcAddr(device, name.encode()), name)


def _as_function(vk: ModuleType, pointer, name: str):
    if pointer == vk.ffi.NULL:
        raise BackendUnavailableError(f"the Vulkan driver does not provide {name}")
    return ffi.cast(f"PFN_{name}", address(vk.ffi, pointer))
