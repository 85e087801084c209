"""pNext chains of feature and property structs, from pyvulkan's FFI and the NV FFI alike.

One table lists every struct coopnn chains, with the device extension or API version it needs; querying features,
querying properties and enabling features all walk that table, so a feature name maps to exactly one struct.
"""

from __future__ import annotations

from dataclasses import dataclass

import cffi

from coopnn.runtime.vk import nv_ffi
from coopnn.runtime.vk.loader import load_vulkan

vk = load_vulkan()

KHR_COOPERATIVE_MATRIX_EXTENSION = "VK_KHR_cooperative_matrix"
PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION = "VK_KHR_pipeline_executable_properties"
ATOMIC_FLOAT_EXTENSION = "VK_EXT_shader_atomic_float"


@dataclass(frozen=True)
class ChainStruct:
    """A struct that extends VkPhysicalDeviceFeatures2/Properties2 when its extension or API version is there."""

    type_name: str
    structure_type: int
    ffi: cffi.FFI
    extension: str | None = None
    min_api: tuple[int, int] = (1, 0)

    def usable(self, api: tuple[int, int], extensions: frozenset[str]) -> bool:
        return api >= self.min_api and (self.extension is None or self.extension in extensions)

    def new(self):
        struct = self.ffi.new(f"{self.type_name}*")
        struct.sType = self.structure_type
        return struct


CORE_FEATURES = "VkPhysicalDeviceFeatures"

FEATURE_STRUCTS = (
    ChainStruct("VkPhysicalDeviceVulkan11Features", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, vk.ffi,
                min_api=(1, 2)),
    ChainStruct("VkPhysicalDeviceVulkan12Features", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, vk.ffi,
                min_api=(1, 2)),
    ChainStruct("VkPhysicalDeviceVulkan13Features", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, vk.ffi,
                min_api=(1, 3)),
    ChainStruct("VkPhysicalDeviceCooperativeMatrixFeaturesKHR",
                vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, vk.ffi,
                extension=KHR_COOPERATIVE_MATRIX_EXTENSION),
    ChainStruct("VkPhysicalDeviceCooperativeVectorFeaturesNV",
                nv_ffi.StructureType.PHYSICAL_DEVICE_COOPERATIVE_VECTOR_FEATURES_NV, nv_ffi.ffi,
                extension=nv_ffi.COOPERATIVE_VECTOR_EXTENSION),
    ChainStruct("VkPhysicalDeviceCooperativeMatrix2FeaturesNV",
                nv_ffi.StructureType.PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, nv_ffi.ffi,
                extension=nv_ffi.COOPERATIVE_MATRIX_2_EXTENSION),
    ChainStruct("VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR",
                vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR, vk.ffi,
                extension=PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION),
    ChainStruct("VkPhysicalDeviceCooperativeMatrixDecodeVectorFeaturesNV",
                nv_ffi.StructureType.PHYSICAL_DEVICE_COOPERATIVE_MATRIX_DECODE_VECTOR_FEATURES_NV, nv_ffi.ffi,
                extension=nv_ffi.COOPERATIVE_MATRIX_DECODE_VECTOR_EXTENSION),
    ChainStruct("VkPhysicalDeviceShaderAtomicFloatFeaturesEXT",
                vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT, vk.ffi,
                extension=ATOMIC_FLOAT_EXTENSION),
    ChainStruct("VkPhysicalDeviceShaderAtomicFloat16VectorFeaturesNV",
                nv_ffi.StructureType.PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT16_VECTOR_FEATURES_NV, nv_ffi.ffi,
                extension=nv_ffi.ATOMIC_FLOAT16_VECTOR_EXTENSION),
)

PROPERTY_STRUCTS = (
    ChainStruct("VkPhysicalDeviceVulkan11Properties", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES,
                vk.ffi, min_api=(1, 2)),
    ChainStruct("VkPhysicalDeviceVulkan12Properties", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES,
                vk.ffi, min_api=(1, 2)),
    ChainStruct("VkPhysicalDeviceVulkan13Properties", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES,
                vk.ffi, min_api=(1, 3)),
    ChainStruct("VkPhysicalDeviceCooperativeMatrixPropertiesKHR",
                vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR, vk.ffi,
                extension=KHR_COOPERATIVE_MATRIX_EXTENSION),
    ChainStruct("VkPhysicalDeviceCooperativeVectorPropertiesNV",
                nv_ffi.StructureType.PHYSICAL_DEVICE_COOPERATIVE_VECTOR_PROPERTIES_NV, nv_ffi.ffi,
                extension=nv_ffi.COOPERATIVE_VECTOR_EXTENSION),
    ChainStruct("VkPhysicalDeviceCooperativeMatrix2PropertiesNV",
                nv_ffi.StructureType.PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV, nv_ffi.ffi,
                extension=nv_ffi.COOPERATIVE_MATRIX_2_EXTENSION),
)


def bool_fields(ffi: cffi.FFI, type_name: str) -> list[str]:
    """The VkBool32 members of a struct: its features, when it is a feature struct."""
    return [name for name, f in ffi.typeof(type_name).fields
            if name not in ("sType", "pNext") and f.type.cname == "uint32_t"]


FEATURE_OWNER: dict[str, str] = {
    **{name: CORE_FEATURES for name in bool_fields(vk.ffi, CORE_FEATURES)},
    **{name: s.type_name for s in FEATURE_STRUCTS for name in bool_fields(s.ffi, s.type_name)},
}
"""Every feature name coopnn can query or enable, mapped to the struct that holds it."""


def link(head, nodes: list) -> None:
    """Point `head` through `nodes` in order (structs of either FFI; they share the `void*` type)."""
    for before, after in zip([head] + nodes, nodes):
        before.pNext = vk.ffi.cast("void*", after)


@dataclass
class StructChain:
    """A head struct and the chained structs by type name; holding it keeps every struct alive."""

    head: object
    structs: dict[str, object]


def build_chain(head_type: str, head_structure_type: int, entries: tuple[ChainStruct, ...]) -> StructChain:
    head = vk.ffi.new(f"{head_type}*")
    head.sType = head_structure_type
    structs = {entry.type_name: entry.new() for entry in entries}
    link(head, list(structs.values()))
    return StructChain(head, structs)


def query_features(physical_device, api: tuple[int, int], extensions: frozenset[str]) -> dict[str, bool]:
    """Every feature in FEATURE_OWNER this device reports, by name (absent structs report False)."""
    usable = tuple(s for s in FEATURE_STRUCTS if s.usable(api, extensions))
    chain = build_chain("VkPhysicalDeviceFeatures2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, usable)
    vk.vkGetPhysicalDeviceFeatures2(physical_device, chain.head)
    structs = {CORE_FEATURES: chain.head.features, **chain.structs}
    return {name: bool(getattr(structs[owner], name)) if owner in structs else False
            for name, owner in FEATURE_OWNER.items()}


def query_properties(physical_device, api: tuple[int, int], extensions: frozenset[str]) -> StructChain:
    """VkPhysicalDeviceProperties2 with every usable property struct chained, filled in by the driver."""
    usable = tuple(s for s in PROPERTY_STRUCTS if s.usable(api, extensions))
    chain = build_chain("VkPhysicalDeviceProperties2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, usable)
    vk.vkGetPhysicalDeviceProperties2(physical_device, chain.head)
    return chain


def enable_chain(features: frozenset[str]) -> tuple[StructChain, frozenset[str]]:
    """A VkPhysicalDeviceFeatures2 chain with exactly `features` set, and the extensions those structs need.

    Only the structs holding a requested feature are chained, so a device is never handed a struct of an extension it
    was not asked to enable.
    """
    unknown = sorted(f for f in features if f not in FEATURE_OWNER)
    if unknown:
        raise ValueError(f"unknown Vulkan features {unknown}; known: {sorted(FEATURE_OWNER)}")
    owners = {FEATURE_OWNER[f] for f in features} - {CORE_FEATURES}
    entries = tuple(s for s in FEATURE_STRUCTS if s.type_name in owners)
    chain = build_chain("VkPhysicalDeviceFeatures2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, entries)
    for feature in features:
        owner = FEATURE_OWNER[feature]
        target = chain.head.features if owner == CORE_FEATURES else chain.structs[owner]
        setattr(target, feature, vk.VK_TRUE)
    return chain, frozenset(s.extension for s in entries if s.extension)
