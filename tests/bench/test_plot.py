"""The throughput PNG: drawn from a saved document, with reference lines; skipped cleanly without matplotlib."""

from __future__ import annotations

import importlib.util

import pytest

from coopnn.bench import plot


def test_reason_when_matplotlib_is_missing(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert "matplotlib is not installed" in plot.plot_unavailable_reason()


def test_png_with_reference_lines(document, tmp_path):
    pytest.importorskip("matplotlib")
    assert plot.plot_unavailable_reason() is None
    path = plot.plot_throughput(document, tmp_path / "throughput.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
