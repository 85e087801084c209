"""The coopnn command line: info, inspect, run, and one-line errors without tracebacks."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import coopnn
from coopnn.cli import COMMANDS, main
from coopnn.layouts.formats import format_names
from tests.conftest import ROOT

MLP = ROOT / "models" / "mlp_32_64x4_16.onnx"
NERF = ROOT / "models" / "nerf_skip_two_heads.onnx"


def test_info_lists_version_and_backends(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "coopnn 0." in out and "numpy" in out and "available" in out


def test_info_names_the_targets_each_device_takes(capsys, monkeypatch):
    monkeypatch.delenv("COOPNN_DEVICE", raising=False)
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    if "vulkan devices:" not in out:
        pytest.skip("no Vulkan device here")
    lines = [line.split("targets: ")[1] for line in out.splitlines() if line.startswith("    targets: ")]
    assert len(lines) == len(re.findall(r"^  \d+: ", out, re.MULTILINE))  # one per device
    for line in lines:
        assert set(line.split(", ")) <= set(coopnn.backends.target_names()) | {"none"}
    assert "COOPNN_DEVICE" not in os.environ  # asked per device, then put back


def test_info_says_whether_each_device_reports_kernel_statistics(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    if "vulkan devices:" not in out:
        pytest.skip("no Vulkan device here")
    devices = len(re.findall(r"^  \d+: ", out, re.MULTILINE))
    lines = [line for line in out.splitlines() if line.startswith("    kernel statistics: ")]
    assert len(lines) == devices
    assert all(line.endswith(("yes (`coopnn kernels`)", "no (VK_KHR_pipeline_executable_properties absent)"))
               for line in lines)


def test_info_with_a_model_says_what_auto_takes_for_it_and_why(capsys):
    assert main(["info", str(MLP)]) == 0
    out = capsys.readouterr().out
    with coopnn.load(MLP) as model:
        backend, weights, reason = model.backend, model.weights, model.backend_reason
    assert f"mlp_32_64x4_16: backend {backend}, weights {weights}, because:" in out
    assert all(part.split(" (")[0] in out for part in reason.split("; "))


def test_inspect_prints_a_layer_table(capsys):
    assert main(["inspect", str(MLP)]) == 0
    out = capsys.readouterr().out
    assert "linear" in out and "relu" in out and "[batch, 64]" in out
    assert f"{32 * 64 + 64 + 3 * (64 * 64 + 64) + 64 * 16 + 16} parameters" in out


def test_run_npy_round_trip(tmp_path):
    x = np.random.default_rng(0).uniform(-1, 1, (9, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(MLP), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"), "-b", "numpy"]) == 0
    import coopnn

    with coopnn.load(MLP, backend="numpy") as model:
        np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), model.run(x))


def test_run_npz_for_several_outputs(tmp_path):
    import coopnn

    with coopnn.load(NERF, backend="numpy") as model:
        feeds = {t.name: np.zeros((4,) + t.shape[1:], np.float32) for t in model.inputs}
        names = [t.name for t in model.outputs]
    np.savez(tmp_path / "x.npz", **feeds)
    assert main(["run", str(NERF), "-i", str(tmp_path / "x.npz"), "-o", str(tmp_path / "y.npz"), "-b", "numpy"]) == 0
    with np.load(tmp_path / "y.npz") as out:
        assert sorted(out.files) == sorted(names)
    assert main(["run", str(NERF), "-i", str(tmp_path / "x.npz"), "-o", str(tmp_path / "y.npy"), "-b", "numpy"]) == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["inspect", "/nonexistent/model.onnx"], "model.onnx"),
        (["run", str(MLP), "-i", "/nonexistent/x.npy", "-o", "/tmp/y.npy"], "x.npy"),
    ],
)
def test_user_errors_print_one_line_without_traceback(tmp_path, argv, message):
    np.save(tmp_path / "x.npy", np.zeros((2, 32), np.float32))
    argv = [a.replace("{x}", str(tmp_path / "x.npy")) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "coopnn.cli", *argv], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("coopnn: error:")]
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_wrong_shape_on_cli_is_one_line(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 5), np.float32))
    proc = subprocess.run(
        [sys.executable, "-m", "coopnn.cli", "run", str(MLP), "-i", str(tmp_path / "x.npy"), "-o",
         str(tmp_path / "y.npy"), "-b", "numpy"],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "expected [batch, 32]" in proc.stderr


@pytest.mark.parametrize("emit, check", [("spirv", lambda b: b[:4] == b"\x03\x02\x23\x07"),
                                         ("spvasm", lambda b: b"OpEntryPoint GLCompute" in b),
                                         ("tl", lambda b: b"gemv.n" in b and b"coopvector<f32x64>" in b)])
def test_compile_emits_spirv_assembly_or_kernel_text(tmp_path, emit, check):
    out = tmp_path / "out"
    assert main(["compile", str(ROOT / "models" / "mlp_3_64x2_3.onnx"), "--emit", emit, "-o", str(out)]) == 0
    assert check(out.read_bytes())


def test_compile_shows_the_decode_vector_variant_of_a_block_format(tmp_path):
    out = tmp_path / "out.tl"
    assert main(["compile", str(ROOT / "models" / "mlp_3_64x2_3.onnx"), "--target", "coopmat2", "--weights", "q4_0",
                 "--decode-vector", "--emit", "tl", "-o", str(out)]) == 0
    text = out.read_text()
    assert "decode(@decode_q4_0, @decode_q4_0_x8)" in text and "; @decode_q4_0_x8: " in text


def test_compile_takes_the_targets_own_tile_or_the_workgroup_size_given(tmp_path):
    out = tmp_path / "out.tl"
    model = str(ROOT / "models" / "mlp_3_64x2_3.onnx")
    assert main(["compile", model, "--target", "coopmat2", "--emit", "tl", "-o", str(out)]) == 0
    assert "work_group_size=[128,1]" in out.read_text()
    assert main(["compile", model, "--target", "coopmat2", "--workgroup-size", "64", "--emit", "tl", "-o",
                 str(out)]) == 0
    assert "work_group_size=[64,1]" in out.read_text()
    assert main(["compile", model, "--emit", "tl", "-o", str(out)]) == 0  # portable
    assert "work_group_size=[64,1]" in out.read_text()
    assert main(["compile", model, "--workgroup-size", "32", "--emit", "tl", "-o", str(out)]) == 0
    assert "work_group_size=[32,1]" in out.read_text()


def test_compile_refuses_a_workgroup_size_the_target_cannot_take(tmp_path, capsys):
    model = str(ROOT / "models" / "mlp_3_64x2_3.onnx")
    assert main(["compile", model, "--target", "coopmat2", "--workgroup-size", "40", "-o", str(tmp_path / "o")]) == 1
    assert "tiles of a whole number of 16 samples" in capsys.readouterr().err
    for bad in ("0", "2048", "many"):
        with pytest.raises(SystemExit):
            main(["compile", model, "--workgroup-size", bad, "-o", str(tmp_path / "o")])
        assert "expected a whole number of samples from 1 to 1024" in capsys.readouterr().err


def _listed(names) -> str:
    return ", ".join(map(repr, names))


@pytest.mark.parametrize("argv, choices", [
    (["run", str(MLP), "-i", "x.npy", "-o", "y.npy", "-b", "tpu"], _listed(["auto", *coopnn.backends.names()])),
    (["run", str(MLP), "-i", "x.npy", "-o", "y.npy", "--weights", "int4"], _listed(["auto", *format_names()])),
    (["compile", str(MLP), "--target", "cuda", "-o", "/tmp/never"], _listed(coopnn.backends.target_names())),
    (["fit-image", "--size", "0"], "not a whole number above zero"),
], ids=["backend", "weights", "target", "size"])
def test_an_invalid_option_is_a_usage_error_naming_the_choices(capsys, argv, choices):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2 and choices in capsys.readouterr().err


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_help_shows_the_defaults_and_the_choices(capsys, monkeypatch, name):
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: nothing split where the test looks
    with pytest.raises(SystemExit):
        main([name, "--help"])
    text = capsys.readouterr().out
    parser = argparse.ArgumentParser()
    COMMANDS[name][1](parser)
    for action in parser._actions:
        if action.choices:
            assert "{" + ",".join(map(str, action.choices)) + "}" in text, action.dest
        if action.option_strings and action.default not in (None, argparse.SUPPRESS) and not action.required:
            assert f"(default: {action.default})" in text, action.dest
    registries = {"run": ["auto", *coopnn.backends.names(), *format_names()], "compile": format_names(),
                  "bench": [*coopnn.backends.names(), *format_names()],
                  "fit-image": [*coopnn.backends.training_backends(), *format_names(), "512, 256, 170, 128"]}
    assert all(choice in text for choice in registries.get(name, []))


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".txt", ".csv"])
def test_run_writes_exactly_the_file_named(tmp_path, suffix, capsys):
    x = np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / f"y{suffix}"
    assert main(["run", str(ROOT / "models" / "mlp_3_64x2_3.onnx"), "-i", str(tmp_path / "x.npy"), "-o", str(out),
                 "--backend", "numpy"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy", out.name]
    assert f"wrote {out}" in capsys.readouterr().out
    if suffix == ".npy":
        read = np.load(out)
    elif suffix == ".npz":
        read = np.load(out)["output"]
    else:
        read = np.loadtxt(out, delimiter="," if suffix == ".csv" else None, ndmin=2)
    with coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx", backend="numpy") as model:
        np.testing.assert_allclose(read, model.run(x), rtol=1e-6 if suffix in (".npy", ".npz") else 1e-5)


def test_run_refuses_an_output_it_cannot_write_before_running(tmp_path, capsys, monkeypatch):
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    monkeypatch.setattr(coopnn, "load", lambda *a, **k: pytest.fail("the model was loaded"))
    assert main(["run", str(ROOT / "models" / "mlp_3_64x2_3.onnx"), "-i", str(tmp_path / "x.npy"),
                 "-o", str(tmp_path / "y.bin")]) == 1
    assert "give an output file ending in .npy, .npz, .txt, .csv" in capsys.readouterr().err
    assert not (tmp_path / "y.bin").exists()


def test_version_and_python_dash_m():
    for argv in ([sys.executable, "-m", "coopnn", "--version"], [sys.executable, "-m", "coopnn.cli", "--version"]):
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == 0 and proc.stdout.strip() == f"coopnn {coopnn.__version__}"


def test_a_device_asked_for_that_does_not_exist_is_an_error_not_a_fall_back(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    proc = subprocess.run([sys.executable, "-m", "coopnn", "run", str(ROOT / "models" / "mlp_3_64x2_3.onnx"), "-i",
                           str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "COOPNN_DEVICE": "no such gpu"})
    assert proc.returncode == 1 and not (tmp_path / "y.npy").exists()
    assert "COOPNN_DEVICE='no such gpu'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("backend", ["numpy", "portable", "auto"])
def test_run_with_a_device_that_matches_none_fails_and_writes_nothing(tmp_path, capsys, backend):
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    assert main(["run", str(ROOT / "models" / "mlp_3_64x2_3.onnx"), "-i", str(tmp_path / "x.npy"),
                 "-o", str(tmp_path / "y.npy"), "--backend", backend, "--device", "99"]) == 1
    assert not (tmp_path / "y.npy").exists() and "coopnn: error: " in capsys.readouterr().err


@pytest.mark.parametrize("write", [lambda p: p.write_bytes(b"garbage bytes, no header"),
                                   lambda p: np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True)],
                         ids=["garbage", "object_array"])
def test_an_untrusted_input_file_is_refused_without_advice_to_unpickle(tmp_path, capsys, write):
    write(tmp_path / "x.npy")
    assert main(["run", str(MLP), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"), "-b", "numpy"]) == 1
    err = capsys.readouterr().err
    assert "not an .npy or .npz file of numbers" in err and "allow_pickle" not in err


def test_run_takes_one_named_array_of_an_npz_and_asks_which_otherwise(tmp_path, capsys):
    x = np.random.default_rng(1).uniform(-1, 1, (4, 32)).astype(np.float32)
    np.savez(tmp_path / "x.npz", zeros=np.zeros_like(x), x=x)
    args = ["-o", str(tmp_path / "y.npy"), "-b", "numpy"]
    assert main(["run", str(MLP), "-i", str(tmp_path / "x.npz"), *args]) == 1
    assert f"name one with --input {tmp_path / 'x.npz'}:NAME" in capsys.readouterr().err
    assert main(["run", str(MLP), "-i", f"{tmp_path / 'x.npz'}:x", *args]) == 0
    with coopnn.load(MLP, backend="numpy") as model:
        np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), model.run(x))


def test_run_and_compile_take_int8_with_a_calibration_file(tmp_path, capsys):
    rng = np.random.default_rng(2)
    x, calibration = rng.uniform(-1, 1, (9, 32)).astype(np.float32), rng.uniform(-1, 1, (500, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "calibration.npz", samples=calibration)  # one array, under any name
    assert main(["run", str(MLP), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"), "-b", "numpy",
                 "--weights", "int8", "--calibration", str(tmp_path / "calibration.npz")]) == 0
    with coopnn.load(MLP, backend="numpy", weights="int8", calibration=calibration) as model:
        np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), model.run(x))
    np.save(tmp_path / "calibration.npy", calibration)
    out = tmp_path / "mlp.spv"
    assert main(["compile", str(MLP), "--weights", "int8", "--calibration", str(tmp_path / "calibration.npy"),
                 "-o", str(out)]) == 0
    assert out.read_bytes() == coopnn.compile(MLP, weights="int8", calibration=calibration).spirv


@pytest.mark.parametrize("argv, message", [
    (["run", str(MLP), "-i", "{x}", "-o", "{y}", "--weights", "int8"], "--weights int8 quantizes each Linear's input "
                                                                       "with a scale measured on calibration data: "
                                                                       "give --calibration FILE"),
    (["compile", str(MLP), "--weights", "int8", "-o", "{y}"], "give --calibration FILE"),
    (["compile", str(MLP), "--weights", "fp16", "--calibration", "{x}", "-o", "{y}"], "weights='fp16' takes no "
                                                                                       "calibration="),
    (["run", str(MLP), "-i", "{x}", "-o", "{y}", "--weights", "int8", "--calibration", "{bad}"],
     "calibration for input 'x' has values that are not finite"),
], ids=["run-without", "compile-without", "not-int8", "not-finite"])
def test_calibration_errors_on_the_command_line_are_one_line(tmp_path, capsys, argv, message):
    np.save(tmp_path / "x.npy", np.zeros((2, 32), np.float32))
    np.save(tmp_path / "bad.npy", np.full((2, 32), np.nan, np.float32))
    paths = {"{x}": tmp_path / "x.npy", "{y}": tmp_path / "y.npy", "{bad}": tmp_path / "bad.npy"}
    assert main([str(paths.get(a, a)) for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("coopnn: error: ") and message in err


def test_kernels_says_in_one_line_why_there_are_no_statistics(capsys):
    for argv in (["kernels", str(MLP), "-b", "numpy"], ["kernels", str(MLP), "-b", "numpy", "--train"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("coopnn: error: kernel statistics need a Vulkan backend") and err.count("\n") == 1
