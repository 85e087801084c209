"""Reading a driver's pipeline statistics: each VkPipelineExecutableStatisticFormatKHR to a Python value (structs
made here, as a driver fills them), without a device."""

from __future__ import annotations

import pytest

from coopnn.runtime.vk.pipeline_statistics import _text, _value, ffi, vk


def _statistic(format: int, field: str, value):
    statistic = ffi.new("VkPipelineExecutableStatisticKHR*")
    statistic.name = b"Register Count"
    statistic.format = format
    setattr(statistic.value, field, value)
    return statistic


@pytest.mark.parametrize("format, field, value, expected", [
    (vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR, "b32", 1, True),
    (vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR, "i64", -3, -3),
    (vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR, "u64", 2 ** 36 + 400, 2 ** 36 + 400),
    (vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR, "f64", 0.75, 0.75),
    (17, "u64", 9, 9),  # a format newer than this code: its bits as an unsigned integer
])
def test_every_statistic_format_reads_as_its_python_value(format, field, value, expected):
    statistic = _statistic(format, field, value)
    read = _value(statistic)
    assert read == expected and type(read) is type(expected)
    assert _text(statistic.name) == "Register Count"
