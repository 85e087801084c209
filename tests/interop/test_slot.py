"""A bridge slot (`coopnn/interop/slot.py`) on any Vulkan device with VK_KHR_external_memory_fd, with stand-ins for
CUDA's side: a repeated run resubmits the recording it made (no command buffer is recorded again, nothing is
allocated), another batch or prologue gets a recording of its own, and a prologue runs before the dispatch."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.interop import slot as slot_module
from coopnn.interop.slot import Prologue, Slot
from coopnn.runtime.executable import load_kernel
from coopnn.runtime.vk.memory import HostAccess
from tests.devices import validation_off_reason, vulkan_skip_reason
from tests.interop.test_output_pool import FakeCudaSide
from tests.runtime.vk.faults import Faults, inject

pytestmark = pytest.mark.vulkan


class HostTimeline:
    """A timeline semaphore of the context alone, standing in for one shared with CUDA (lavapipe exports none); the
    host signals it."""

    def __init__(self, context, driver):
        from coopnn.runtime.vk.loader import load_vulkan

        vk = load_vulkan()
        timeline = vk.VkSemaphoreTypeCreateInfo(semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
        self.handle = vk.vkCreateSemaphore(context.device.handle, vk.VkSemaphoreCreateInfo(pNext=timeline), None)
        self._destroy = lambda: vk.vkDestroySemaphore(context.device.handle, self.handle, None)
        self.value = 0

    def release_cuda(self) -> None:
        pass

    def release_vulkan(self) -> None:
        self._destroy()


@pytest.fixture
def model(require_vulkan):
    with coopnn.mlp(4, [8], 2, backend="portable", seed=3) as model:
        yield model


@pytest.fixture
def context(model):
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)
    from coopnn.runtime.vk.context import VulkanContext, list_devices

    if not any("VK_KHR_external_memory_fd" in d.extensions for d in list_devices()):
        pytest.skip("no Vulkan device lists VK_KHR_external_memory_fd")
    features = set(model._executable.binary.features) | {"timelineSemaphore"}
    context = VulkanContext(features=features, extensions={"VK_KHR_external_memory_fd"},
                            validation=validation_off_reason() is None)
    yield context
    messages = list(context.debug_messages)
    context.close()
    assert messages == []


def _staged(context, array: np.ndarray):
    buffer = context.create_buffer(array.nbytes, HostAccess.WRITE)
    buffer.write(np.ascontiguousarray(array))
    return buffer


def _copy(context, source, destination, size: int) -> None:
    from coopnn.runtime.vk.loader import load_vulkan

    vk = load_vulkan()
    context.submit(lambda cmd: vk.vkCmdCopyBuffer(cmd, source.handle, destination.handle, 1,
                                                  [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=size)]))


def _run(slot, context, kernel, binary, weights, x: np.ndarray, output, prologue=None) -> np.ndarray:
    """Write `x` into the slot's input, record (or reuse) and submit one dispatch, and read the output back."""
    batch = len(x)
    source = _staged(context, x.astype(np.float32))
    inputs = slot.input_buffer(0, x.nbytes)
    _copy(context, source, inputs, x.nbytes)
    slot.record(kernel, (weights, inputs, output), [inputs, output], binary.pack_push(count=batch),
                kernel.group_count_for(batch), [], prologue)
    slot.submit(0, slot.inputs_ready)
    slot.wait()
    readable = context.create_buffer(batch * 2 * 4, HostAccess.READ)
    _copy(context, output, readable, batch * 2 * 4)
    return readable.read(np.float32, batch * 2).reshape(batch, 2)


def _begun(faults: Faults) -> int:
    return faults.calls.count("vkBeginCommandBuffer")


def test_a_repeated_run_resubmits_its_recording(context, model, monkeypatch):
    from coopnn.interop.vk_export import ExportedBuffer

    monkeypatch.setattr(slot_module, "SharedTimeline", HostTimeline)
    binary = model._executable.binary
    kernel = load_kernel(context, binary)
    weights = _staged(context, np.frombuffer(binary.weight_image.data, np.uint8))
    slot = Slot(context, FakeCudaSide(), 1, 1)
    output = ExportedBuffer(context, 1 << 16)
    x = np.random.default_rng(0).uniform(-1, 1, (40, 4)).astype(np.float32)
    want = model.run(x)
    with inject(Faults()) as first:
        np.testing.assert_allclose(_run(slot, context, kernel, binary, weights, x, output), want, rtol=1e-4,
                                   atol=1e-5)
    with inject(Faults()) as again:
        got = _run(slot, context, kernel, binary, weights, x[::-1].copy(), output)
    np.testing.assert_allclose(got, want[::-1], rtol=1e-4, atol=1e-5)
    # the staging copies and the read-back record through the context alike; the slot's recording is made once
    assert _begun(again) == _begun(first) - 1
    assert "vkAllocateCommandBuffers" not in again.calls and "vkAllocateDescriptorSets" not in again.calls
    key = slot.recorded
    with inject(Faults()) as other:
        _run(slot, context, kernel, binary, weights, x[:17], output)
    assert _begun(other) == _begun(first) and slot.recorded != key  # another batch: a recording of its own
    slot.release_cuda()
    slot.release_vulkan()


def test_a_prologue_runs_before_the_dispatch_and_keys_its_recording(context, model, monkeypatch):
    from coopnn.interop.vk_export import ExportedBuffer
    from coopnn.runtime.vk.loader import load_vulkan

    vk = load_vulkan()
    monkeypatch.setattr(slot_module, "SharedTimeline", HostTimeline)
    binary = model._executable.binary
    kernel = load_kernel(context, binary)
    size = len(binary.weight_image.data)
    weights = context.create_buffer(size, HostAccess.NONE)
    master = ExportedBuffer(context, size)
    _copy(context, _staged(context, np.frombuffer(binary.weight_image.data, np.uint8)), master, size)
    refresh = Prologue("weights", (master,), lambda cmd: vk.vkCmdCopyBuffer(
        cmd, master.handle, weights.handle, 1, [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=size)]))
    slot = Slot(context, FakeCudaSide(), 1, 1)
    output = ExportedBuffer(context, 1 << 16)
    x = np.random.default_rng(1).uniform(-1, 1, (33, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(slot, context, kernel, binary, weights, x, output, refresh), model.run(x),
                               rtol=1e-4, atol=1e-5)
    with_prologue = slot.recorded
    _run(slot, context, kernel, binary, weights, x, output)
    assert slot.recorded != with_prologue and slot.recorded[:-1] == with_prologue[:-1]
    slot.release_cuda()
    slot.release_vulkan()
