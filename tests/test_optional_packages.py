"""The test run of an install without the export extra (`pip install -e '.[test]'`): PyTorch and onnxscript are
optional, so no test module imports them outright; each test needing them skips with the reason
(`tests.conftest.import_torch`, `pytest.importorskip(..., reason=...)`)."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT

OPTIONAL = {"torch", "onnxscript"}  # what the export extra brings and the test extra leaves out


def _extras() -> dict[str, list[str]]:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def _package(requirement: str) -> str:
    return requirement.split("=")[0].split(">")[0].split("<")[0].split("[")[0].strip().lower()


def test_the_test_extra_leaves_pytorch_to_the_export_extra():
    extras = _extras()
    assert not OPTIONAL & {_package(r) for r in extras["test"]}
    assert OPTIONAL <= {_package(r) for r in extras["export"]}


def test_no_test_module_imports_an_optional_package_outright():
    outright = []
    # A *_worker.py is no test module: it is the program a test starts in a process of its own (torchrun's ranks),
    # and only after that test has checked the package is there.
    for path in sorted(p for p in (ROOT / "tests").rglob("*.py") if not p.name.endswith("_worker.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            outright += [f"{path.relative_to(ROOT)}:{node.lineno}" for n in names if n.split(".")[0] in OPTIONAL]
    assert not outright


def test_every_skip_for_a_missing_optional_package_gives_its_reason():
    silent = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip"
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value in OPTIONAL
                    and not any(k.arg == "reason" for k in node.keywords)):
                silent.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not silent
