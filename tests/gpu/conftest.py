"""Fixtures for tests that need a device with VK_NV_cooperative_vector: they skip, with the reason, everywhere else.

The converted-weight and pipeline caches go to a temporary directory for the session, so the tests neither read
nor leave anything in the user's cache. One Vulkan context stays open for the session: with none alive between them,
NVIDIA's driver (580.159) refuses vkCreateInstance with VK_ERROR_INCOMPATIBLE_DRIVER after about 27 contexts have been
created and closed in a process, and these tests make more than that.
"""

from __future__ import annotations

import functools
import os

import pytest


@functools.cache
def coopvec_skip_reason() -> str | None:
    from coopnn.backends.coopvec.backend import CoopvecBackend

    reason = CoopvecBackend().unavailable_reason()
    return f"no device with cooperative vectors: {reason}" if reason else None


@pytest.fixture(scope="session")
def coopvec_device(tmp_path_factory):
    reason = coopvec_skip_reason()
    if reason:
        pytest.skip(reason)
    from coopnn.runtime.vk.context import VulkanContext

    previous = os.environ.get("COOPNN_CACHE_DIR")
    os.environ["COOPNN_CACHE_DIR"] = str(tmp_path_factory.mktemp("coopnn-cache"))
    with VulkanContext():
        yield
    if previous is None:
        del os.environ["COOPNN_CACHE_DIR"]
    else:
        os.environ["COOPNN_CACHE_DIR"] = previous
