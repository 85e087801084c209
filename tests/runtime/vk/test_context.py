"""Lifetime: close() and collection destroy every Vulkan object; 2,000 runs grow neither objects nor host memory."""

from __future__ import annotations

import gc
import os
import struct

import numpy as np
import pytest

pytestmark = [pytest.mark.vulkan, pytest.mark.usefixtures("require_vulkan")]

SOAK_RUNS = 2000
# Python's allocator and the driver keep small pools; a leak of even one small object per run would exceed this.
RSS_GROWTH_LIMIT = 1 << 20


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _populate(context, spirv):
    kernel = context.create_kernel(spirv, binding_count=2, push_constant_size=4)
    x = context.create_buffer(1024)
    y = context.create_buffer(1024)
    x.write(np.ones(256, np.float32))
    kernel.run([x, y], struct.pack("<I", 256), 4)
    return kernel, x, y


def test_close_destroys_everything_and_is_idempotent(make_context, axpb_spirv):
    context = make_context()
    kernel, x, y = _populate(context, axpb_spirv)
    live = context.live_objects()
    for kind in ("VkInstance", "VkDevice", "VkPipeline", "VkPipelineLayout", "VkDescriptorSetLayout",
                 "VkDescriptorPool", "VkBuffer", "VkDeviceMemory", "VkCommandPool", "VkFence"):
        assert live.get(kind, 0) >= 1, kind
    assert "VkShaderModule" not in live and "VkPipelineCache" not in live
    context.close()
    assert context.live_objects() == {} and context.closed
    context.close()
    kernel.destroy()
    x.destroy()
    assert not x.alive and not kernel.alive
    with pytest.raises(RuntimeError, match="closed"):
        context.create_buffer(16)
    with pytest.raises(RuntimeError, match="destroyed"):
        y.read()


def test_objects_dropped_by_python_are_destroyed(make_context, axpb_spirv):
    context = make_context()
    baseline = context.live_objects()
    populated = _populate(context, axpb_spirv)
    assert context.live_objects() != baseline
    del populated
    gc.collect()
    assert context.live_objects() == baseline


def test_a_collected_context_destroys_everything(context_options, axpb_spirv):
    from coopnn.runtime.vk.context import VulkanContext

    context = VulkanContext(**context_options)
    tracker, messages = context.tracker, context.debug_messages
    _populate(context, axpb_spirv)
    del context
    gc.collect()
    assert tracker.counts() == {}
    assert messages == []


@pytest.mark.slow
def test_soak_of_2000_runs_grows_nothing(vk_context, axpb_spirv):
    from coopnn.runtime.vk.memory import Placement

    kernel = vk_context.create_kernel(axpb_spirv, binding_count=2, push_constant_size=4, specialization={0: 3.0})
    count = 1000
    values = np.linspace(0, 1, count, dtype=np.float32)
    x = vk_context.create_buffer(values.nbytes, placement=Placement.STAGED)
    y = vk_context.create_buffer(values.nbytes, placement=Placement.STAGED)
    push = struct.pack("<I", count)
    groups = kernel.group_count_for(count)

    def step() -> float:
        x.write(values)
        gpu_ms = kernel.run([x, y], push, groups)
        np.testing.assert_allclose(y.read(np.float32), values * np.float32(3.0))
        return gpu_ms

    for _ in range(200):
        step()
    gc.collect()
    objects, rss = vk_context.live_objects(), resident_bytes()
    times = [step() for _ in range(SOAK_RUNS)]
    gc.collect()
    assert vk_context.live_objects() == objects
    assert resident_bytes() - rss < RSS_GROWTH_LIMIT
    assert min(times) > 0
