"""What a physical device is and can do, read once into plain frozen dataclasses (`DeviceInfo`).

Covers identity (name, type, vendor, driver, API version, UUIDs), the limits the targets size kernels by, subgroup
properties, every feature coopnn knows by name, extensions, memory types, the compute queue family, and summaries of
cooperative-vector (VK_NV_cooperative_vector), cooperative-matrix (VK_KHR_cooperative_matrix) and cooperative-matrix-2
(VK_NV_cooperative_matrix2) support. An extension the device lacks is reported as None, never queried.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping

from coopnn.runtime.vk import nv_ffi
from coopnn.runtime.vk.chain import KHR_COOPERATIVE_MATRIX_EXTENSION, bool_fields, query_features, query_properties
from coopnn.runtime.vk.loader import check, load_vulkan

vk = load_vulkan()

MIN_API = (1, 3)

DEVICE_TYPE_NAMES = {
    vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: "discrete",
    vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: "integrated",
    vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: "virtual",
    vk.VK_PHYSICAL_DEVICE_TYPE_CPU: "cpu",
    vk.VK_PHYSICAL_DEVICE_TYPE_OTHER: "other",
}

VENDOR_NAMES = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x13B5: "ARM", 0x5143: "Qualcomm",
                0x106B: "Apple", vk.VK_VENDOR_ID_MESA: "Mesa"}


def _nvidia_driver_version(v: int) -> str:
    return f"{v >> 22}.{(v >> 14) & 0xFF}.{(v >> 6) & 0xFF}.{v & 0x3F}"


def _vulkan_style_version(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


# Vendors that pack driverVersion their own way; the rest use the Vulkan version encoding.
DRIVER_VERSION_FORMATS = {0x10DE: _nvidia_driver_version}


@dataclass(frozen=True)
class DeviceLimits:
    max_compute_work_group_size: tuple[int, int, int]
    max_compute_work_group_invocations: int
    max_compute_work_group_count: tuple[int, int, int]
    max_compute_shared_memory_size: int
    max_storage_buffer_range: int
    max_push_constants_size: int
    min_storage_buffer_offset_alignment: int
    max_memory_allocation_size: int
    max_buffer_size: int
    timestamp_period_ns: float
    timestamp_compute_and_graphics: bool


@dataclass(frozen=True)
class SubgroupInfo:
    size: int
    min_size: int
    max_size: int
    supported_stages: int
    supported_operations: int


@dataclass(frozen=True)
class MemoryType:
    index: int
    property_flags: int
    heap_index: int
    heap_size: int
    heap_device_local: bool

    def has(self, flags: int) -> bool:
        return self.property_flags & flags == flags


@dataclass(frozen=True)
class CooperativeVectorCombination:
    """One row of vkGetPhysicalDeviceCooperativeVectorPropertiesNV: a supported type combination."""

    input_type: nv_ffi.ComponentType
    input_interpretation: nv_ffi.ComponentType
    matrix_interpretation: nv_ffi.ComponentType
    bias_interpretation: nv_ffi.ComponentType
    result_type: nv_ffi.ComponentType
    transpose: bool


@dataclass(frozen=True)
class CooperativeVectorSupport:
    cooperative_vector: bool
    training: bool
    supported_stages: int
    training_float16_accumulation: bool
    training_float32_accumulation: bool
    max_components: int
    combinations: tuple[CooperativeVectorCombination, ...]


@dataclass(frozen=True)
class CooperativeMatrixShape:
    """A supported cooperative-matrix shape; for flexible dimensions m/n/k are granularities and
    `workgroup_invocations` the workgroup size it needs (0: any)."""

    m: int
    n: int
    k: int
    a_type: nv_ffi.ComponentType
    b_type: nv_ffi.ComponentType
    c_type: nv_ffi.ComponentType
    result_type: nv_ffi.ComponentType
    saturating_accumulation: bool
    scope: nv_ffi.Scope
    workgroup_invocations: int = 0


@dataclass(frozen=True)
class CooperativeMatrixSupport:
    """VK_KHR_cooperative_matrix."""

    cooperative_matrix: bool
    robust_buffer_access: bool
    supported_stages: int
    shapes: tuple[CooperativeMatrixShape, ...]


@dataclass(frozen=True)
class CooperativeMatrix2Support:
    """VK_NV_cooperative_matrix2: its seven features, three limits and the flexible-dimension shapes."""

    features: Mapping[str, bool]
    workgroup_scope_max_workgroup_size: int
    flexible_dimensions_max_dimension: int
    workgroup_scope_reserved_shared_memory: int
    flexible_shapes: tuple[CooperativeMatrixShape, ...]


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    device_type: str
    vendor_id: int
    vendor: str
    device_id: int
    driver_version: int
    driver_version_text: str
    driver_name: str
    driver_info: str
    api_version: tuple[int, int, int]
    device_uuid: str
    pipeline_cache_uuid: str
    limits: DeviceLimits
    subgroup: SubgroupInfo
    features: Mapping[str, bool]
    extensions: frozenset[str]
    memory_types: tuple[MemoryType, ...]
    compute_queue_family: int | None
    timestamp_valid_bits: int
    cooperative_vector: CooperativeVectorSupport | None
    cooperative_matrix: CooperativeMatrixSupport | None
    cooperative_matrix2: CooperativeMatrix2Support | None

    @property
    def unsuitable_reason(self) -> str | None:
        """Why coopnn cannot run on this device, or None."""
        if self.api_version[:2] < MIN_API:
            return f"Vulkan {'.'.join(map(str, self.api_version))} < {'.'.join(map(str, MIN_API))}"
        if self.compute_queue_family is None:
            return "no compute queue"
        return None

    def describe(self) -> str:
        api = ".".join(map(str, self.api_version))
        return (f"{self.index}: {self.name} [{self.device_type}, {self.vendor}, Vulkan {api}, "
                f"driver {self.driver_name} {self.driver_version_text}]")


def query_device_info(instance, physical_device, index: int) -> DeviceInfo:
    """Everything coopnn wants to know about `physical_device` (enumeration position `index`)."""
    basic = vk.vkGetPhysicalDeviceProperties(physical_device)
    api = (basic.apiVersion >> 22, (basic.apiVersion >> 12) & 0x3FF, basic.apiVersion & 0xFFF)
    extensions = frozenset(e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical_device, None))
    features = query_features(physical_device, api[:2], extensions)
    properties = query_properties(physical_device, api[:2], extensions)
    core, chain = properties.head.properties, properties.structs
    v11 = chain.get("VkPhysicalDeviceVulkan11Properties")
    v12 = chain.get("VkPhysicalDeviceVulkan12Properties")
    v13 = chain.get("VkPhysicalDeviceVulkan13Properties")
    queue_family, valid_bits = _compute_queue_family(physical_device)
    return DeviceInfo(
        index=index,
        name=vk.ffi.string(core.deviceName).decode(),
        device_type=DEVICE_TYPE_NAMES.get(core.deviceType, "other"),
        vendor_id=core.vendorID,
        vendor=VENDOR_NAMES.get(core.vendorID, f"0x{core.vendorID:04x}"),
        device_id=core.deviceID,
        driver_version=core.driverVersion,
        driver_version_text=DRIVER_VERSION_FORMATS.get(core.vendorID, _vulkan_style_version)(core.driverVersion),
        driver_name=vk.ffi.string(v12.driverName).decode() if v12 else "",
        driver_info=vk.ffi.string(v12.driverInfo).decode() if v12 else "",
        api_version=api,
        device_uuid=bytes(list(v11.deviceUUID)).hex() if v11 else "",
        pipeline_cache_uuid=bytes(list(core.pipelineCacheUUID)).hex(),
        limits=_limits(core.limits, v11, v13),
        subgroup=SubgroupInfo(
            size=v11.subgroupSize if v11 else 0,
            min_size=v13.minSubgroupSize if v13 else 0,
            max_size=v13.maxSubgroupSize if v13 else 0,
            supported_stages=v11.subgroupSupportedStages if v11 else 0,
            supported_operations=v11.subgroupSupportedOperations if v11 else 0),
        features=MappingProxyType(features),
        extensions=extensions,
        memory_types=_memory_types(physical_device),
        compute_queue_family=queue_family,
        timestamp_valid_bits=valid_bits,
        cooperative_vector=_cooperative_vector(instance, physical_device, features, chain, extensions),
        cooperative_matrix=_cooperative_matrix(instance, physical_device, features, chain, extensions),
        cooperative_matrix2=_cooperative_matrix2(instance, physical_device, features, chain, extensions),
    )


def _limits(limits, v11, v13) -> DeviceLimits:
    return DeviceLimits(
        max_compute_work_group_size=tuple(limits.maxComputeWorkGroupSize),
        max_compute_work_group_invocations=limits.maxComputeWorkGroupInvocations,
        max_compute_work_group_count=tuple(limits.maxComputeWorkGroupCount),
        max_compute_shared_memory_size=limits.maxComputeSharedMemorySize,
        max_storage_buffer_range=limits.maxStorageBufferRange,
        max_push_constants_size=limits.maxPushConstantsSize,
        min_storage_buffer_offset_alignment=limits.minStorageBufferOffsetAlignment,
        max_memory_allocation_size=v11.maxMemoryAllocationSize if v11 else limits.maxStorageBufferRange,
        max_buffer_size=v13.maxBufferSize if v13 else limits.maxStorageBufferRange,
        timestamp_period_ns=float(limits.timestampPeriod),
        timestamp_compute_and_graphics=bool(limits.timestampComputeAndGraphics))


def _memory_types(physical_device) -> tuple[MemoryType, ...]:
    memory = vk.vkGetPhysicalDeviceMemoryProperties(physical_device)
    heaps = [memory.memoryHeaps[i] for i in range(memory.memoryHeapCount)]
    return tuple(
        MemoryType(index=i, property_flags=t.propertyFlags, heap_index=t.heapIndex, heap_size=heaps[t.heapIndex].size,
                   heap_device_local=bool(heaps[t.heapIndex].flags & vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT))
        for i, t in ((i, memory.memoryTypes[i]) for i in range(memory.memoryTypeCount)))


def _compute_queue_family(physical_device) -> tuple[int | None, int]:
    """The first compute-capable queue family with timestamps, else the first compute-capable one."""
    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(physical_device)  # the array owns the rows read below
    compute = [(i, f.timestampValidBits) for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
    ranked = sorted(compute, key=lambda family: family[1] == 0)
    return ranked[0] if ranked else (None, 0)


def _cooperative_vector(instance, physical_device, features, chain, extensions) -> CooperativeVectorSupport | None:
    if nv_ffi.COOPERATIVE_VECTOR_EXTENSION not in extensions:
        return None
    props = chain["VkPhysicalDeviceCooperativeVectorPropertiesNV"]
    ct = nv_ffi.ComponentType
    combinations = _enumerate(
        nv_ffi.instance_function(vk, instance, "vkGetPhysicalDeviceCooperativeVectorPropertiesNV"), physical_device,
        "VkCooperativeVectorPropertiesNV", nv_ffi.StructureType.COOPERATIVE_VECTOR_PROPERTIES_NV,
        lambda r: CooperativeVectorCombination(ct(r.inputType), ct(r.inputInterpretation), ct(r.matrixInterpretation),
                                               ct(r.biasInterpretation), ct(r.resultType), bool(r.transpose)))
    return CooperativeVectorSupport(
        cooperative_vector=features["cooperativeVector"],
        training=features["cooperativeVectorTraining"],
        supported_stages=props.cooperativeVectorSupportedStages,
        training_float16_accumulation=bool(props.cooperativeVectorTrainingFloat16Accumulation),
        training_float32_accumulation=bool(props.cooperativeVectorTrainingFloat32Accumulation),
        max_components=props.maxCooperativeVectorComponents,
        combinations=combinations)


def _cooperative_matrix(instance, physical_device, features, chain, extensions) -> CooperativeMatrixSupport | None:
    if KHR_COOPERATIVE_MATRIX_EXTENSION not in extensions:
        return None
    query = vk.vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    return CooperativeMatrixSupport(
        cooperative_matrix=features["cooperativeMatrix"],
        robust_buffer_access=features["cooperativeMatrixRobustBufferAccess"],
        supported_stages=chain["VkPhysicalDeviceCooperativeMatrixPropertiesKHR"].cooperativeMatrixSupportedStages,
        shapes=tuple(_matrix_shape(r, r.MSize, r.NSize, r.KSize) for r in query(physical_device)))


def _cooperative_matrix2(instance, physical_device, features, chain, extensions) -> CooperativeMatrix2Support | None:
    if nv_ffi.COOPERATIVE_MATRIX_2_EXTENSION not in extensions:
        return None
    props = chain["VkPhysicalDeviceCooperativeMatrix2PropertiesNV"]
    names = bool_fields(nv_ffi.ffi, "VkPhysicalDeviceCooperativeMatrix2FeaturesNV")
    flexible = ()
    if features["cooperativeMatrixFlexibleDimensions"]:
        query = "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"
        flexible = _enumerate(
            nv_ffi.instance_function(vk, instance, query), physical_device,
            "VkCooperativeMatrixFlexibleDimensionsPropertiesNV",
            nv_ffi.StructureType.COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV,
            lambda r: _matrix_shape(r, r.MGranularity, r.NGranularity, r.KGranularity, r.workgroupInvocations))
    return CooperativeMatrix2Support(
        features=MappingProxyType({n: features[n] for n in names}),
        workgroup_scope_max_workgroup_size=props.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize,
        flexible_dimensions_max_dimension=props.cooperativeMatrixFlexibleDimensionsMaxDimension,
        workgroup_scope_reserved_shared_memory=props.cooperativeMatrixWorkgroupScopeReservedSharedMemory,
        flexible_shapes=flexible)


def _matrix_shape(row, m: int, n: int, k: int, workgroup_invocations: int = 0) -> CooperativeMatrixShape:
    ct = nv_ffi.ComponentType
    return CooperativeMatrixShape(m, n, k, ct(row.AType), ct(row.BType), ct(row.CType), ct(row.ResultType),
                                  bool(row.saturatingAccumulation), nv_ffi.Scope(row.scope), workgroup_invocations)


def _enumerate(function, physical_device, struct_name: str, structure_type: int, convert: Callable) -> tuple:
    """The two-call count-then-fill pattern for an NV query, each row converted by `convert` while the array that
    owns the rows is still alive (row cdata do not keep it alive)."""
    handle = nv_ffi.ffi.cast("VkPhysicalDevice", nv_ffi.address(vk.ffi, physical_device))
    count = nv_ffi.ffi.new("uint32_t*")
    # VK_INCOMPLETE only says the driver had more rows than asked for; the rows asked for are valid.
    accepted = (vk.VK_SUCCESS, vk.VK_INCOMPLETE)
    check(vk, function(handle, count, nv_ffi.ffi.NULL), f"querying {struct_name}", accepted)
    rows = nv_ffi.ffi.new(f"{struct_name}[]", count[0])
    for row in rows:
        row.sType = structure_type
    check(vk, function(handle, count, rows), f"querying {struct_name}", accepted)
    return tuple(convert(rows[i]) for i in range(count[0]))
