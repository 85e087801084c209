"""Device enumeration, feature queries, device selection (device= and COOPNN_DEVICE) and logical-device creation."""

from __future__ import annotations

import dataclasses

import pytest

from coopnn.errors import BackendUnavailableError

pytestmark = [pytest.mark.vulkan, pytest.mark.usefixtures("require_vulkan")]

TARGET_FEATURES = ("shaderFloat16", "storageBuffer16BitAccess", "vulkanMemoryModel", "shaderInt8")


@pytest.fixture(scope="module")
def devices(require_vulkan):
    from coopnn.runtime.vk.context import list_devices

    return list_devices()


def test_every_device_is_described(devices):
    assert devices
    for info in devices:
        assert info.name and info.device_type in ("discrete", "integrated", "virtual", "cpu", "other")
        assert info.api_version >= (1, 0, 0) and info.describe().startswith(f"{info.index}: {info.name}")
        assert all(isinstance(v, bool) for v in info.features.values())
        assert set(TARGET_FEATURES) <= set(info.features)
        assert info.extensions and all(isinstance(e, str) for e in info.extensions)
        if info.unsuitable_reason is None:
            limits = info.limits
            assert min(limits.max_compute_work_group_size) >= 1 and limits.max_compute_work_group_invocations >= 128
            assert limits.max_storage_buffer_range > 0 and limits.max_push_constants_size >= 128
            assert limits.timestamp_period_ns > 0 and info.subgroup.size >= 1
            assert info.memory_types and len(info.device_uuid) == 32


def test_missing_cooperative_extensions_are_reported_as_absent(devices):
    from coopnn.runtime.vk import nv_ffi

    for info in devices:
        assert (info.cooperative_vector is None) == (nv_ffi.COOPERATIVE_VECTOR_EXTENSION not in info.extensions)
        assert (info.cooperative_matrix2 is None) == (nv_ffi.COOPERATIVE_MATRIX_2_EXTENSION not in info.extensions)
        assert (info.cooperative_matrix is None) == ("VK_KHR_cooperative_matrix" not in info.extensions)
        if info.cooperative_vector is None:
            assert not info.features["cooperativeVector"] and not info.features["cooperativeVectorTraining"]


def test_asking_an_unsupported_cooperative_vector_device_fails_clearly(make_context, devices):
    without = [d for d in devices if d.unsuitable_reason is None and not d.features["cooperativeVector"]]
    if not without:
        pytest.skip("every device here supports cooperative vectors")
    with pytest.raises(BackendUnavailableError, match="cooperativeVector.*VK_NV_cooperative_vector"):
        make_context(device=without[0].index, features={"cooperativeVector"})


def test_unknown_feature_names_are_rejected(make_context):
    with pytest.raises(ValueError, match="unknown Vulkan features"):
        make_context(features={"shaderFloat17"})


def test_requested_features_are_enabled(make_context):
    context = make_context()
    wanted = {f for f in TARGET_FEATURES if context.info.features[f]}
    context.close()
    context = make_context(features=wanted)
    assert context.device.features == wanted


def test_selection_prefers_discrete_then_integrated_then_virtual_then_cpu(devices):
    from coopnn.runtime.vk.selection import preference_order, select_device

    usable = next(d for d in devices if d.unsuitable_reason is None)
    fake = [dataclasses.replace(usable, index=i, name=f"{kind} device", device_type=kind)
            for i, kind in enumerate(["cpu", "virtual", "integrated", "discrete", "integrated"])]
    assert [d.index for d in preference_order(fake)] == [3, 2, 4, 1, 0]
    assert select_device(fake, None).device_type == "discrete"
    assert select_device(fake, "VIRTUAL").index == 1
    assert select_device(fake, 4).index == 4
    assert select_device(fake, " 0 ").index == 0


def test_unusable_devices_are_never_chosen(devices):
    from coopnn.runtime.vk.selection import select_device

    usable = next(d for d in devices if d.unsuitable_reason is None)
    old = dataclasses.replace(usable, index=0, name="old gpu", device_type="discrete", api_version=(1, 1, 0))
    new = dataclasses.replace(usable, index=1, name="new cpu", device_type="cpu")
    assert select_device([old, new]).name == "new cpu"
    with pytest.raises(BackendUnavailableError, match=r"old gpu .*unusable: Vulkan 1\.1\.0 < 1\.3"):
        select_device([old, new], "old")


def test_coopnn_device_selects_by_case_insensitive_name(make_context, devices, monkeypatch):
    from coopnn.runtime.vk.selection import DEVICE_ENV

    target = next(d for d in devices if d.unsuitable_reason is None)
    monkeypatch.setenv(DEVICE_ENV, target.name[2:8].upper())
    assert make_context().info.index == target.index
    monkeypatch.setenv(DEVICE_ENV, str(target.index))
    assert make_context().info.name == target.name


def test_unknown_device_name_lists_the_devices(make_context, devices, monkeypatch):
    from coopnn.runtime.vk.selection import DEVICE_ENV

    monkeypatch.setenv(DEVICE_ENV, "no-such-gpu-9000")
    with pytest.raises(BackendUnavailableError) as caught:
        make_context()
    message = str(caught.value)
    assert "COOPNN_DEVICE" in message and "no-such-gpu-9000" in message
    assert all(d.name in message for d in devices)
    with pytest.raises(BackendUnavailableError, match="device="):
        make_context(device="no-such-gpu-9000")
    with pytest.raises(BackendUnavailableError, match="device="):
        make_context(device=len(devices))


def test_explicit_device_argument_wins_over_the_environment(make_context, devices, monkeypatch):
    from coopnn.runtime.vk.selection import DEVICE_ENV

    target = next(d for d in devices if d.unsuitable_reason is None)
    monkeypatch.setenv(DEVICE_ENV, "no-such-gpu-9000")
    assert make_context(device=target.index).info.name == target.name


def test_probe_answers_without_raising(devices):
    from coopnn.runtime.vk.probe import vulkan_unavailable_reason

    assert vulkan_unavailable_reason() is None
    assert vulkan_unavailable_reason(devices[0].index) is None or devices[0].unsuitable_reason
    reason = vulkan_unavailable_reason("no-such-gpu-9000")
    assert "no-such-gpu-9000" in reason and devices[0].name in reason
