"""The training kernels build their instructions through `Ops` and `Indices`, not opcode names typed at each use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
KERNELS = ("coopnn/backends/coopvec/tiled_step.py", "coopnn/backends/coopvec/tiled_fused.py",
           "coopnn/shaders/training/tiles", "coopnn/shaders/training/coopmat_gradients.py",
           "coopnn/shaders/training/gradients.py", "coopnn/shaders/training/indices.py",
           "coopnn/backends/coopvec/coopvec_gradients.py", "coopnn/backends/coopvec/accumulate.py",
           "coopnn/backends/coopvec/table_atomics", "coopnn/shaders/targets/encodings/grid.py")


def kernel_files() -> list[Path]:
    paths = [ROOT / k for k in KERNELS]
    return sorted(f for p in paths for f in ([p] if p.is_file() else p.glob("*.py")))


@pytest.mark.parametrize("path", kernel_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_opcode_name_is_typed(path):
    typed = re.findall(r"[\"']Op[A-Z]\w*[\"']", path.read_text())
    assert not typed, f"{path.name} names opcodes {sorted(set(typed))}: use coopnn.shaders.spirv.ops.Ops or Indices"
