"""Exported Vulkan objects (`coopnn/interop/vk_export.py`) on any Vulkan device with VK_KHR_external_memory_fd."""

from __future__ import annotations

import gc
import os

from coopnn.interop.vk_export import ExportedBuffer, interop_unavailable_reason


def test_exported_buffers_bind_like_buffers_and_are_tracked(export_context):
    before = export_context.live_objects()
    buffer = ExportedBuffer(export_context, 1000)
    assert buffer.size == 1000 and buffer.allocation_size >= 1000 and buffer.alive
    assert buffer.serial != ExportedBuffer(export_context, 16).serial
    fd = buffer.export_fd()
    try:
        os.fstat(fd)
    finally:
        os.close(fd)
    gc.collect()  # the second buffer above is gone
    buffer.destroy()
    buffer.destroy()
    assert not buffer.alive and export_context.live_objects() == before


def test_a_context_without_semaphore_export_is_refused_with_the_reason(export_context):
    reason = interop_unavailable_reason(export_context)
    assert reason is not None and "VK_KHR_external_semaphore_fd" in reason
