"""What a driver reports about a compute pipeline it compiled (VK_KHR_pipeline_executable_properties): for each
executable its name, description, subgroup size and statistics, named and described in the driver's own words
(registers per invocation, spilled bytes, shared memory, instruction counts: whatever that driver lists).

The device must have enabled the feature `pipelineExecutableInfo` (FEATURE) and the pipeline must have been made with
VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR (`ComputeKernel(capture_statistics=True)`).
"""

from __future__ import annotations

from dataclasses import dataclass

from coopnn.runtime.vk.chain import PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION
from coopnn.runtime.vk.device import Device, extension_command
from coopnn.runtime.vk.loader import load_vulkan

vk = load_vulkan()
ffi = vk.ffi

EXTENSION = PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION
FEATURE = "pipelineExecutableInfo"

_VALUE_FIELD = {vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: "b32",
                vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: "i64",
                vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: "u64",
                vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: "f64"}


@dataclass(frozen=True)
class Statistic:
    name: str
    description: str
    value: int | float | bool


@dataclass(frozen=True)
class ExecutableStatistics:
    """One executable of a pipeline (a compute pipeline has one, unless the driver splits it)."""

    name: str
    description: str
    subgroup_size: int
    statistics: tuple[Statistic, ...]


def _text(chars) -> str:
    return ffi.string(chars).decode("utf-8", "replace")


def _value(statistic) -> int | float | bool:
    field = _VALUE_FIELD.get(statistic.format)
    if field is None:  # a format newer than this code: its bits as an unsigned integer
        return int(statistic.value.u64)
    value = getattr(statistic.value, field)
    return bool(value) if field == "b32" else value


def _two_calls(device: Device, command, info, type_name: str, structure_type: int, call: str) -> list:
    """The Vulkan enumerate idiom: the count, then that many structs (sType set), then their filled-in values."""
    count = ffi.new("uint32_t*")
    device.health.result(command(device.handle, info, count, ffi.NULL), call)
    structs = ffi.new(f"{type_name}[]", count[0])
    for struct in structs:
        struct.sType = structure_type
    device.health.result(command(device.handle, info, count, structs), call)
    return list(structs)[:count[0]]


def read_statistics(device: Device, pipeline) -> tuple[ExecutableStatistics, ...]:
    """The statistics of every executable of `pipeline` (made with CAPTURE_STATISTICS on `device`)."""
    properties_command = extension_command(device, "vkGetPipelineExecutablePropertiesKHR")
    statistics_command = extension_command(device, "vkGetPipelineExecutableStatisticsKHR")
    pipeline_info = ffi.new("VkPipelineInfoKHR*", {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR,
                                                    "pipeline": pipeline})
    executables = _two_calls(device, properties_command, pipeline_info, "VkPipelineExecutablePropertiesKHR",
                             vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR,
                             "vkGetPipelineExecutablePropertiesKHR")
    out = []
    for index, executable in enumerate(executables):
        executable_info = ffi.new("VkPipelineExecutableInfoKHR*", {
            "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, "pipeline": pipeline,
            "executableIndex": index})
        statistics = _two_calls(device, statistics_command, executable_info, "VkPipelineExecutableStatisticKHR",
                                vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR,
                                "vkGetPipelineExecutableStatisticsKHR")
        out.append(ExecutableStatistics(_text(executable.name), _text(executable.description),
                                        executable.subgroupSize,
                                        tuple(Statistic(_text(s.name), _text(s.description), _value(s))
                                              for s in statistics)))
    return tuple(out)
