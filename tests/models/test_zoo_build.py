"""The committed zoo is what models/build_zoo.py exports today: same bytes, checker clean, PyTorch-equal."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_rebuilding_the_zoo_reproduces_the_committed_files():
    pytest.importorskip("torch", reason="exporting the zoo needs the export extra (pip install -e '.[export]')")
    proc = subprocess.run([sys.executable, "models/build_zoo.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
