"""ComputeKernel and Dispatcher on a real device: y = a*x + b with a bounds check, every placement, timestamps, and
dispatches alongside each other.

Drivers may fuse the multiply and add (SPIR-V allows contraction), so results are compared within one float32 ulp.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

pytestmark = [pytest.mark.vulkan, pytest.mark.usefixtures("require_vulkan")]

ATOL = 1e-6


@pytest.fixture
def axpb(vk_context, axpb_spirv):
    kernel = vk_context.create_kernel(axpb_spirv, binding_count=2, push_constant_size=4,
                                      specialization={0: 2.5, 1: -1.0}, name="axpb")
    yield kernel
    kernel.destroy()


@pytest.mark.parametrize("count", [1, 63, 64, 1000, 4097])
@pytest.mark.parametrize("placement_name", ["DIRECT", "STAGED"])
def test_axpb_matches_numpy_and_respects_the_bound(vk_context, axpb, count, placement_name):
    from coopnn.runtime.vk.memory import Placement

    placement = Placement[placement_name]
    rng = np.random.default_rng(count)
    x_values = rng.standard_normal(count + 64).astype(np.float32)
    sentinel = np.full(count + 64, 1234.5, np.float32)
    x = vk_context.create_buffer(x_values.nbytes, placement=placement)
    y = vk_context.create_buffer(x_values.nbytes, placement=placement)
    x.write(x_values)
    y.upload(sentinel)
    gpu_ms = axpb.run([x, y], struct.pack("<I", count), axpb.group_count_for(count))
    out = y.read(np.float32)
    np.testing.assert_allclose(out[:count], x_values[:count] * np.float32(2.5) - np.float32(1.0), rtol=1e-6, atol=ATOL)
    np.testing.assert_array_equal(out[count:], sentinel[count:])
    assert gpu_ms is not None and gpu_ms > 0


def test_two_dispatches_in_one_submission_see_each_others_writes(vk_context, axpb):
    from coopnn.runtime.vk.commands import Dispatch

    count = 777
    values = np.linspace(-1, 1, count, dtype=np.float32)
    a, b, c = (vk_context.create_buffer(values.nbytes) for _ in range(3))
    a.write(values)
    push = np.array([count], np.uint32)
    groups = axpb.group_count_for(count)
    gpu_ms = vk_context.run([Dispatch(axpb, (a, b), push, groups), Dispatch(axpb, (b, c), push, groups)])
    expected = (values * np.float32(2.5) - np.float32(1.0)) * np.float32(2.5) - np.float32(1.0)
    np.testing.assert_allclose(c.read(np.float32), expected, rtol=1e-6, atol=ATOL)
    assert gpu_ms > 0


def test_default_specialization_and_device_placement(vk_context, axpb_spirv):
    from coopnn.runtime.vk.memory import HostAccess

    kernel = vk_context.create_kernel(axpb_spirv, binding_count=2, push_constant_size=4)
    values = np.arange(100, dtype=np.float32)
    x = vk_context.create_buffer(values.nbytes, host_access=HostAccess.NONE)
    y = vk_context.create_buffer(values.nbytes, host_access=HostAccess.NONE)
    x.write(values)
    kernel.run([x, y], struct.pack("<I", 100), kernel.group_count_for(100))
    np.testing.assert_array_equal(y.read(np.float32), values)


def test_staged_download_range_brings_back_only_that_range(vk_context, axpb):
    from coopnn.runtime.vk.memory import Placement

    values = np.arange(256, dtype=np.float32)
    x = vk_context.create_buffer(values.nbytes, placement=Placement.STAGED)
    y = vk_context.create_buffer(values.nbytes, placement=Placement.STAGED)
    x.write(values)
    y.upload(np.zeros(256, np.float32))
    axpb.run([x, y], struct.pack("<I", 256), 4, downloads={y: (0, 64 * 4)})
    out = y.read(np.float32)
    np.testing.assert_allclose(out[:64], values[:64] * np.float32(2.5) - np.float32(1.0), atol=ATOL)
    np.testing.assert_array_equal(out[64:], 0)
    np.testing.assert_allclose(y.download(np.float32)[64:], values[64:] * np.float32(2.5) - np.float32(1.0), atol=ATOL)


def test_descriptor_sets_are_reused_for_the_same_buffers(vk_context, axpb):
    x = vk_context.create_buffer(256)
    y = vk_context.create_buffer(256)
    assert axpb.descriptor_set([x, y]) is axpb.descriptor_set([x, y])


def test_misuse_is_rejected_with_the_reason(vk_context, axpb, axpb_spirv):
    x = vk_context.create_buffer(256)
    with pytest.raises(ValueError, match="push constants"):
        axpb.run([x, x], b"\0" * 8, 1)
    with pytest.raises(ValueError, match="takes 2 buffers"):
        axpb.run([x], b"\0" * 4, 1)
    with pytest.raises(ValueError, match="group count"):
        axpb.run([x, x], b"\0" * 4, vk_context.info.limits.max_compute_work_group_count[0] + 1)
    with pytest.raises(ValueError, match="SPIR-V"):
        vk_context.create_kernel(b"not spir-v", binding_count=2)
    with pytest.raises(ValueError, match="push_constant_size"):
        vk_context.create_kernel(axpb_spirv, binding_count=2,
                                 push_constant_size=vk_context.info.limits.max_push_constants_size + 4)
    with pytest.raises(ValueError, match="workgroup size"):
        vk_context.create_kernel(axpb_spirv, binding_count=2, push_constant_size=4,
                                 workgroup_size=(vk_context.info.limits.max_compute_work_group_invocations + 1, 1, 1))


def test_descriptor_sets_are_recycled_beyond_the_cache(vk_context, axpb):
    from coopnn.runtime.vk.commands import Dispatch

    values = np.arange(64, dtype=np.float32)
    pairs = [(vk_context.create_buffer(values.nbytes), vk_context.create_buffer(values.nbytes))
             for _ in range(axpb.descriptor_set_capacity + 3)]
    for x, y in pairs:
        x.write(values)
        axpb.run([x, y], struct.pack("<I", 64), 1)
    for x, y in pairs:
        np.testing.assert_allclose(y.read(np.float32), values * np.float32(2.5) - np.float32(1.0), atol=ATOL)
    too_many = [Dispatch(axpb, pair, struct.pack("<I", 64), 1) for pair in pairs]
    with pytest.raises(ValueError, match="different buffer lists"):
        vk_context.run(too_many)


def test_a_pipeline_the_driver_rejects_is_a_compile_error(vk_context, axpb_spirv, monkeypatch):
    from coopnn.errors import CompileError
    from coopnn.runtime.vk.loader import load_vulkan

    vk = load_vulkan()

    def reject(*args):
        raise vk.VkErrorInvalidShaderNv()

    monkeypatch.setattr(vk_context.pipeline_cache, "create_pipeline", reject)
    before = vk_context.live_objects()
    with pytest.raises(CompileError, match="rejected the compute pipeline of broken"):
        vk_context.create_kernel(axpb_spirv, binding_count=2, push_constant_size=4, name="broken")
    assert vk_context.live_objects() == before


def test_bad_download_ranges_are_refused_before_anything_runs(vk_context, axpb):
    from coopnn.runtime.vk.memory import Placement

    x = vk_context.create_buffer(256, placement=Placement.STAGED)
    y = vk_context.create_buffer(256, placement=Placement.DIRECT)
    x.write(np.ones(64, np.float32))
    with pytest.raises(ValueError, match="only STAGED"):
        axpb.run([x, y], struct.pack("<I", 64), 1, downloads={y: (0, 256)})
    with pytest.raises(ValueError, match="does not fit"):
        axpb.run([x, y], struct.pack("<I", 64), 1, downloads={x: (128, 256)})
    assert x.take_pending_upload() == (0, 256)


def test_dispatches_alongside_each_other_both_run(vk_context, axpb):
    from coopnn.runtime.vk.commands import Dispatch

    count = 513
    values = np.linspace(-2, 2, count, dtype=np.float32)
    a, b, c, d = (vk_context.create_buffer(values.nbytes) for _ in range(4))
    a.write(values)
    c.write(-values)
    push, groups = np.array([count], np.uint32), axpb.group_count_for(count)
    vk_context.run([Dispatch(axpb, (a, b), push, groups), Dispatch(axpb, (c, d), push, groups, alongside=True)])
    np.testing.assert_allclose(b.read(np.float32), values * np.float32(2.5) - np.float32(1.0), rtol=1e-6, atol=ATOL)
    np.testing.assert_allclose(d.read(np.float32), -values * np.float32(2.5) - np.float32(1.0), rtol=1e-6, atol=ATOL)


def test_a_dispatch_alongside_nothing_or_recorded_commands_is_refused(vk_context, axpb):
    from coopnn.runtime.vk.commands import Dispatch, Recorded

    x, y = vk_context.create_buffer(256), vk_context.create_buffer(256)
    alongside = Dispatch(axpb, (x, y), struct.pack("<I", 64), 1, alongside=True)
    with pytest.raises(ValueError, match="it is the first command"):
        vk_context.run([alongside])
    with pytest.raises(ValueError, match="recorded commands precede it"):
        vk_context.run([Recorded(lambda cmd: None), alongside])
