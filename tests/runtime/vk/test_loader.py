"""Vulkan stays out of the way: coopnn imports without it, and a missing package or loader is a clear typed error.

These tests need no Vulkan device (they simulate its absence), so they run everywhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest

from coopnn.errors import BackendUnavailableError


def _run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env})


def test_coopnn_and_the_numpy_backend_never_import_vulkan():
    result = _run_python("import sys, coopnn, coopnn.backends.numpy.inference, coopnn.runtime.vk\n"
                         "assert 'vulkan' not in sys.modules, 'vulkan was imported'\n")
    assert result.returncode == 0, result.stderr


def _failing_import(error: BaseException):
    def import_module(name: str):
        raise error

    return types.SimpleNamespace(import_module=import_module)


def test_missing_loader_says_what_to_install(monkeypatch):
    from coopnn.runtime.vk import loader

    monkeypatch.setattr(loader, "_checked", None)  # as in a process that has not loaded it yet
    monkeypatch.setattr(loader, "importlib", _failing_import(OSError("Cannot find Vulkan SDK version")))
    with pytest.raises(BackendUnavailableError,
                       match=r"libvulkan\.so\.1.*apt-get install libvulkan1 mesa-vulkan-drivers"):
        loader.load_vulkan()


def test_probe_reports_the_reason_instead_of_raising():
    code = ("import sys\n"
            "sys.modules['vulkan'] = None\n"
            "from coopnn.runtime.vk.probe import vulkan_unavailable_reason\n"
            "print(vulkan_unavailable_reason())\n")
    result = _run_python(code)
    assert result.returncode == 0, result.stderr
    assert "the Python package 'vulkan' is not importable" in result.stdout


def test_missing_package_says_what_to_install(monkeypatch):
    from coopnn.runtime.vk import loader

    monkeypatch.setattr(loader, "_checked", None)  # as in a process that has not loaded it yet
    monkeypatch.setattr(loader, "importlib", _failing_import(ImportError("No module named 'vulkan'")))
    with pytest.raises(BackendUnavailableError, match=r"pip install 'vulkan"):
        loader.load_vulkan()


def test_modules_needing_vulkan_raise_the_typed_error_when_it_is_missing():
    code = ("import sys, types\n"
            "sys.modules['vulkan'] = None\n"
            "from coopnn.errors import BackendUnavailableError\n"
            "try:\n"
            "    import coopnn.runtime.vk.context\n"
            "except BackendUnavailableError as exc:\n"
            "    print('typed:', exc)\n")
    result = _run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("typed: the Python package 'vulkan' is not importable")


def test_a_loader_without_any_driver_is_a_typed_error():
    from coopnn.runtime.vk.loader import load_vulkan

    try:
        load_vulkan()
    except BackendUnavailableError as exc:
        pytest.skip(f"needs a Vulkan loader to run without drivers: {exc}")
    code = ("from coopnn.errors import BackendUnavailableError\n"
            "from coopnn.runtime.vk.context import VulkanContext\n"
            "try:\n"
            "    VulkanContext()\n"
            "except BackendUnavailableError as exc:\n"
            "    print('typed:', exc)\n")
    result = _run_python(code, VK_DRIVER_FILES="/nonexistent/icd.json", VK_ICD_FILENAMES="/nonexistent/icd.json")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("typed: no Vulkan driver could be loaded")
    assert "mesa-vulkan-drivers" in result.stdout
