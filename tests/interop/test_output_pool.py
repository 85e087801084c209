"""The pool of output buffers (`coopnn/interop/output_pool.py`) on any Vulkan device with VK_KHR_external_memory_fd,
with a stand-in for CUDA's side: reuse per stream, freeing beyond the idle limit, outputs outliving the pool."""

from __future__ import annotations

import contextlib
import gc
import os

from coopnn.interop.output_pool import IDLE_LIMIT, OutputPool


class FakeCudaSide:
    """Stands in for the CUDA driver where the bridge's buffers meet it: imports close the fd, as CUDA owns it."""

    def __init__(self):
        self.mapped: dict[int, int] = {}  # pointer -> external memory handle
        self.events: list[str] = []
        self._next = 1

    def import_memory(self, fd, size, dedicated):
        assert dedicated and size > 0
        os.fstat(fd)  # a real, open file descriptor
        os.close(fd)
        self._next += 1
        return self._next

    def map_buffer(self, memory, offset, size):
        pointer = memory << 32
        self.mapped[pointer] = memory
        return pointer

    def free(self, pointer):
        self.events.append("free")
        del self.mapped[pointer]

    def destroy_memory(self, memory):
        self.events.append("destroy")

    def synchronize(self):
        self.events.append("synchronize")

    @contextlib.contextmanager
    def current(self, context):
        yield


def _pool(context, driver):
    return OutputPool(context, driver, cuda_context=0, bindable_limit=1 << 20)


def test_pooled_outputs_are_reused_on_their_stream_only(export_context):
    driver = FakeCudaSide()
    pool = _pool(export_context, driver)
    first = pool.lend(1000, stream=7, bindable=True)
    output = pool.output(first, (250,), "<f4", stream=7)
    assert output.__cuda_array_interface__["data"] == (first.pointer, False)
    assert pool.counts() == {"idle": 0, "lent": 1}
    del output
    gc.collect()
    assert pool.counts() == {"idle": 1, "lent": 0}
    pool.reclaim()
    other_stream = pool.lend(1000, stream=8, bindable=True)
    assert other_stream is not first
    assert pool.lend(900, stream=7, bindable=True) is first
    assert first.size == 1 << 16  # rounded up: small batches of any size share it


def test_idle_buffers_beyond_the_limit_are_freed_after_cuda_is_done(export_context):
    driver = FakeCudaSide()
    pool = _pool(export_context, driver)
    buffers = [pool.lend(4096, stream=1, bindable=True) for _ in range(IDLE_LIMIT + 2)]
    for buffer in buffers:
        pool.take_back(buffer, stream=1)
    live = export_context.live_objects()["VkBuffer"]
    pool.reclaim()
    assert driver.events == ["synchronize"] + ["free", "destroy"] * 2
    assert pool.counts()["idle"] == IDLE_LIMIT
    assert export_context.live_objects()["VkBuffer"] == live - 2


def test_closing_the_pool_leaves_live_outputs_their_memory(export_context):
    driver = FakeCudaSide()
    pool = _pool(export_context, driver)
    kept = pool.output(pool.lend(4096, stream=1, bindable=True), (1024,), "<f4", stream=1)
    pool.take_back(pool.lend(4096, stream=1, bindable=True), stream=1)
    buffers = export_context.live_objects()["VkBuffer"]
    pool.close()
    # the idle buffer is freed on both sides; the live output's Vulkan side goes, its CUDA mapping stays
    assert driver.events == ["free", "destroy"]
    assert export_context.live_objects().get("VkBuffer", 0) == buffers - 2
    assert kept.pointer in driver.mapped
    del kept
    gc.collect()
    assert driver.events == ["free", "destroy", "synchronize", "free", "destroy"]
    assert driver.mapped == {}
