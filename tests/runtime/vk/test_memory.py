"""Buffers: round trips of 4 bytes to 64 MiB in every placement, partial writes, rows written over threads,
placement choice, limits."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytestmark = [pytest.mark.vulkan, pytest.mark.usefixtures("require_vulkan")]

SIZES = [4, 12, 4096 + 4, 1 << 20, 64 << 20]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("placement_name", ["DIRECT", "STAGED", "DEVICE"])
def test_upload_download_round_trip(vk_context, size, placement_name):
    from coopnn.runtime.vk.memory import Placement

    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    buffer = vk_context.create_buffer(size, placement=Placement[placement_name])
    try:
        buffer.upload(data)
        np.testing.assert_array_equal(buffer.download(), data)
    finally:
        buffer.destroy()


@pytest.mark.parametrize("placement_name", ["DIRECT", "STAGED", "DEVICE"])
def test_partial_writes_and_typed_reads(vk_context, placement_name):
    from coopnn.runtime.vk.memory import Placement

    buffer = vk_context.create_buffer(1024, placement=Placement[placement_name])
    buffer.upload(np.zeros(256, np.float32))
    buffer.upload(np.arange(8, dtype=np.float32), offset=64)
    buffer.upload(b"\x01\x02\x03\x04", offset=1020)
    values = buffer.download(np.float32)
    np.testing.assert_array_equal(values[16:24], np.arange(8, dtype=np.float32))
    assert values[:16].tolist() == [0.0] * 16
    np.testing.assert_array_equal(buffer.download(np.uint8, 4, 1020), [1, 2, 3, 4])
    with pytest.raises(ValueError, match="outside"):
        buffer.write(b"\0" * 8, offset=1020)


@pytest.mark.parametrize("placement_name", ["DIRECT", "STAGED", "DEVICE"])
def test_rows_are_written_packed_and_cast_from_any_strides(vk_context, placement_name):
    from coopnn.runtime.vk.memory import Placement

    # every other row of a float64 array, 8 MiB as float32: split over the copy threads
    source = np.random.default_rng(3).uniform(-1, 1, (2 << 18, 8))[::2]
    buffer = vk_context.create_buffer(256 + source.size * 4, placement=Placement[placement_name])
    try:
        buffer.upload(np.zeros(64, np.float32))
        buffer.write_rows(source, np.float32, offset=256)
        buffer.flush()
        values = buffer.download(np.float32)
        np.testing.assert_array_equal(values[64:].reshape(source.shape), source.astype(np.float32))
        assert values[:64].tolist() == [0.0] * 64
        with pytest.raises(ValueError, match="outside"):
            buffer.write_rows(source, np.float32, offset=260)
    finally:
        buffer.destroy()


def test_device_address_buffers_report_an_address(make_context):
    context = make_context(features={"bufferDeviceAddress"})
    buffer = context.create_buffer(256, device_address=True)
    assert buffer.device_address and buffer.device_address > 0
    assert context.create_buffer(256).device_address is None


def test_placement_choice_follows_memory_types(vk_context):
    from coopnn.runtime.vk.memory import (DEVICE_LOCAL, HOST_CACHED, HOST_COHERENT, HOST_VISIBLE, HostAccess,
                                          Placement, choose_placement)

    info = vk_context.info

    def with_types(*flag_sets, heap_size=8 << 30):
        types = tuple(dataclasses.replace(info.memory_types[0], index=i, property_flags=f, heap_size=heap_size)
                      for i, f in enumerate(flag_sets))
        return dataclasses.replace(info, memory_types=types)

    host = HOST_VISIBLE | HOST_COHERENT
    unified = with_types(DEVICE_LOCAL | host | HOST_CACHED)
    rebar = with_types(DEVICE_LOCAL, DEVICE_LOCAL | host, host | HOST_CACHED)
    bar_window = with_types(DEVICE_LOCAL | host, heap_size=256 << 20)
    assert choose_placement(unified, HostAccess.READ_WRITE) is Placement.DIRECT
    assert choose_placement(rebar, HostAccess.WRITE) is Placement.DIRECT
    assert choose_placement(rebar, HostAccess.READ) is Placement.STAGED
    assert choose_placement(bar_window, HostAccess.WRITE) is Placement.STAGED
    assert choose_placement(unified, HostAccess.NONE) is Placement.DEVICE


def test_sizes_outside_the_limits_are_refused(vk_context):
    limits = vk_context.info.limits
    with pytest.raises(ValueError, match="positive"):
        vk_context.create_buffer(0)
    with pytest.raises(ValueError, match="limit"):
        vk_context.create_buffer(min(limits.max_buffer_size, limits.max_memory_allocation_size) + 1)


def test_destroyed_buffer_refuses_access(vk_context):
    buffer = vk_context.create_buffer(64)
    buffer.destroy()
    buffer.destroy()
    assert not buffer.alive
    with pytest.raises(RuntimeError, match="destroyed"):
        buffer.write(b"\0" * 4)
