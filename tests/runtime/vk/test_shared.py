"""One context per device per process: scopes share it, each destroys only what it made, the last one closes it."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from coopnn import backends
from coopnn.errors import BackendUnavailableError
from coopnn.runtime.vk import shared

pytestmark = [pytest.mark.vulkan, pytest.mark.usefixtures("require_vulkan")]


def _run_axpb(scope, spirv) -> tuple[np.ndarray, tuple]:
    """The kernel's result, and the objects made for it (kept alive by the caller)."""
    kernel = scope.create_kernel(spirv, binding_count=2, push_constant_size=4)
    x = scope.create_buffer(1024)
    y = scope.create_buffer(1024)
    x.write(np.arange(256, dtype=np.float32))
    kernel.run([x, y], struct.pack("<I", 256), 4)
    return y.read(np.float32, 256), (kernel, x, y)


def _users(context) -> int:
    """Open scopes on `context` (other tests' models and device arrays may hold some)."""
    return sum(s.users for group in shared._contexts.values() for s in group if s.context is context)


def test_scopes_share_one_device_and_destroy_only_their_own_objects(axpb_spirv):
    first = shared.open_context()
    second = shared.open_context()
    others = _users(first.shared_context) - 2
    try:
        assert first.shared_context is second.shared_context
        assert first.device.handle == second.device.handle
        first_result, first_objects = _run_axpb(first, axpb_spirv)
        second_result, second_objects = _run_axpb(second, axpb_spirv)
        np.testing.assert_array_equal(first_result, second_result)
        mine = first.live_objects()
        assert mine.get("VkBuffer") == 2 and mine.get("VkPipeline") == 1 and "VkDevice" not in mine
        first.close()
        assert first.live_objects() == {} and first.closed
        assert not second.shared_context.closed
        assert second.live_objects().get("VkBuffer") == 2
        assert not any(o.alive for o in first_objects[1:])
        np.testing.assert_array_equal(_run_axpb(second, axpb_spirv)[0], second_result)
        assert not second.debug_messages
    finally:
        first.close()
        second.close()
    context = second.shared_context
    assert _users(context) == others
    assert context.closed == (others == 0)  # the last scope closes it
    if context.closed:
        assert context.live_objects() == {}


def test_the_shared_context_enables_what_every_backend_may_use():
    every = set().union(*(b.device_features for b in backends.all_backends()))
    with shared.open_context() as scope:
        supported = {f for f in every if scope.info.features.get(f)}
        assert supported <= scope.features


def test_a_feature_the_device_lacks_is_a_typed_error_naming_it():
    with shared.open_context() as scope:
        lacking = next((f for f in ("cooperativeVector", "cooperativeMatrix", "shaderFloat64")
                        if not scope.info.features.get(f)), None)
    if lacking is None:
        pytest.skip("this device has every feature the test would ask for")
    with pytest.raises(BackendUnavailableError, match=lacking):
        shared.open_context(features={lacking})


def test_a_kernel_needing_a_feature_the_device_lacks_is_refused_before_the_driver_sees_it(axpb_spirv):
    from coopnn.runtime.executable import load_kernel
    from coopnn.shaders.training.shader import training_kernel

    with shared.open_context() as scope:
        lacking = next((f for f in ("cooperativeVector", "cooperativeMatrix", "shaderFloat64")
                        if not scope.info.features.get(f)), None)
        if lacking is None:
            pytest.skip("this device has every feature the test would ask for")
        before = len(scope.debug_messages)
        binary = training_kernel("axpb", axpb_spirv, (64, 1, 1), 2, (), frozenset({lacking}))
        with pytest.raises(BackendUnavailableError, match=f"axpb needs {lacking}, which .* lacks"):
            load_kernel(scope, binary, "axpb")
        assert scope.debug_messages[before:] == []


def test_closing_a_scope_while_buffers_are_referenced_leaves_them_unusable_not_crashing(axpb_spirv):
    scope = shared.open_context()
    buffer = scope.create_buffer(64)
    scope.close()
    assert not buffer.alive
    with pytest.raises(RuntimeError, match="closed"):
        scope.create_buffer(64)


def test_interop_features_are_enabled_whenever_the_device_has_them():
    """The CUDA bridge and host-memory imports work on any model's context, whoever opened it first."""
    with shared.open_context(features={"vulkanMemoryModel"}) as scope:
        for feature in ("timelineSemaphore",):
            assert bool(scope.info.features.get(feature)) == (feature in scope.features)
        for extension in ("VK_KHR_external_memory_fd", "VK_KHR_external_semaphore_fd", "VK_EXT_external_memory_host"):
            assert (extension in scope.info.extensions) == (extension in scope.device.extensions)
