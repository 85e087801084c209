"""`coopnn tl check|print|compile|run`: diagnostics and status, canonical text, SPIR-V files, runs through the
interpreter (and on Vulkan, marked)."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.cli import main

KERNEL = """func @double(%a: memref<f32x?>) {
    %c0 = constant 0 : index
    %n = size %a[0] : index
    foreach (%i) = (%c0), (%n) {
        %x = load %a[%i] : f32
        %y = add %x, %x : f32
        store %y, %a[%i]
    }
}
"""


@pytest.fixture
def kernel(tmp_path):
    path = tmp_path / "double.tl"
    path.write_text(KERNEL)
    return path


def test_check_reports_success_and_diagnostics(kernel, tmp_path, capsys):
    assert main(["tl", "check", str(kernel)]) == 0
    assert "1 function(s) check" in capsys.readouterr().out
    bad = tmp_path / "bad.tl"
    bad.write_text(KERNEL.replace("%x, %x", "%x, %z"))
    assert main(["tl", "check", str(bad)]) == 1
    assert capsys.readouterr().out == f"{bad}:6.22-23: Undefined value %z\n"


def test_print_writes_the_canonical_text(kernel, tmp_path):
    out = tmp_path / "canonical.tl"
    assert main(["tl", "print", str(kernel), "-o", str(out)]) == 0
    assert "foreach (%i)=(%c0),(%n) {" in out.read_text()


def test_compile_writes_spirv(kernel, tmp_path, capsys):
    out = tmp_path / "double.spv"
    assert main(["tl", "compile", str(kernel), "-o", str(out), "--subgroup-size", "32"]) == 0
    assert out.read_bytes()[:4] == bytes.fromhex("03022307")
    assert "subgroup size 32, work-group 64x1" in capsys.readouterr().err


def test_run_through_the_interpreter_saves_the_arrays(kernel, tmp_path):
    np.save(tmp_path / "a.npy", np.arange(5, dtype=np.float32))
    assert main(["tl", "run", str(kernel), str(tmp_path / "a.npy"), "--interpret", "-o", str(tmp_path / "out")]) == 0
    assert np.load(tmp_path / "out" / "a.npy").tolist() == [0, 2, 4, 6, 8]


def test_syntax_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.tl"
    bad.write_text("func @f() { %x = nope }")
    assert main(["tl", "print", str(bad)]) == 1
    assert capsys.readouterr().err == f"coopnn: error: {bad}:1.18-21: unknown instruction 'nope'\n"


@pytest.mark.vulkan
def test_run_on_vulkan(kernel, tmp_path, capsys, validated_device):
    np.save(tmp_path / "a.npy", np.ones(3, np.float32))
    assert main(["tl", "run", str(kernel), str(tmp_path / "a.npy")]) == 0
    assert "%a = [2. 2. 2.]" in capsys.readouterr().out
