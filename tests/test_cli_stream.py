"""`coopnn run` in chunks: results equal one run of the whole batch, a progress bar on stderr when there are several
chunks, and an .npy of a few GiB streamed with the process's peak memory far below the file's size."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import coopnn
from coopnn import cli_stream
from coopnn.cli import main
from coopnn.cli_arrays import release
from tests.conftest import ROOT

MLP = ROOT / "models" / "mlp_3_64x2_3.onnx"
NERF = ROOT / "models" / "nerf_skip_two_heads.onnx"


def _run(tmp_path, model, x, suffix: str, backend: str = "numpy") -> np.ndarray:
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / f"y{suffix}"
    assert main(["run", str(model), "-i", str(tmp_path / "x.npy"), "-o", str(out), "-b", backend]) == 0
    if suffix == ".npy":
        return np.load(out)
    if suffix == ".npz":
        return np.load(out)["output"]
    return np.loadtxt(out, delimiter="," if suffix == ".csv" else None, ndmin=2)


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".txt", ".csv"])
def test_a_run_in_many_chunks_equals_one_run_of_the_whole_batch(tmp_path, monkeypatch, suffix):
    monkeypatch.setattr(cli_stream, "CHUNK_ROWS", 7)
    x = np.random.default_rng(0).uniform(-1, 1, (50, 3)).astype(np.float32)
    with coopnn.load(MLP, backend="numpy") as model:
        expected = model.run(x)
    np.testing.assert_allclose(_run(tmp_path, MLP, x, suffix), expected, rtol=1e-5, atol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy", f"y{suffix}"]


def test_a_run_in_chunks_on_the_gpu_is_bit_for_bit(tmp_path, monkeypatch, validated_device):
    monkeypatch.setattr(cli_stream, "CHUNK_ROWS", 64)
    x = np.random.default_rng(1).uniform(-1, 1, (1000, 3)).astype(">f8")  # converted chunk by chunk
    with coopnn.load(MLP, backend="portable") as model:
        expected = model.run(x)
    np.testing.assert_array_equal(_run(tmp_path, MLP, x, ".npy", "portable"), expected)


def test_several_inputs_and_outputs_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(cli_stream, "CHUNK_ROWS", 3)
    rng = np.random.default_rng(2)
    with coopnn.load(NERF, backend="numpy") as model:
        feeds = {t.name: rng.uniform(-1, 1, (10,) + t.shape[1:]).astype(np.float32) for t in model.inputs}
        expected = model.run(feeds)
    np.savez(tmp_path / "x.npz", **feeds)
    assert main(["run", str(NERF), "-i", str(tmp_path / "x.npz"), "-o", str(tmp_path / "y.npz"), "-b", "numpy"]) == 0
    with np.load(tmp_path / "y.npz") as read:
        assert sorted(read.files) == sorted(expected)
        for name, values in expected.items():
            np.testing.assert_allclose(read[name], values, rtol=1e-5, atol=1e-6)


def test_the_progress_bar_follows_the_chunks_in_ten_lines_off_a_terminal(tmp_path, monkeypatch, capsys):
    x = np.zeros((100, 3), np.float32)
    _run(tmp_path, MLP, x, ".npy")
    assert "run [" not in capsys.readouterr().err  # one chunk: no bar
    monkeypatch.setattr(cli_stream, "CHUNK_ROWS", 3)
    _run(tmp_path, MLP, x, ".npy")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("run [")]
    assert len(lines) == 10 and "100/100 100%" in lines[-1]


def test_empty_and_mismatched_inputs(tmp_path, capsys):
    assert _run(tmp_path, MLP, np.zeros((0, 3), np.float32), ".npy").shape == (0, 3)
    with coopnn.load(NERF, backend="numpy") as model:
        names = [t.name for t in model.inputs]
    np.savez(tmp_path / "x.npz", **{names[0]: np.zeros((4, 3), np.float32), names[1]: np.zeros((5, 3), np.float32)})
    assert main(["run", str(NERF), "-i", str(tmp_path / "x.npz"), "-o", str(tmp_path / "y.npz"), "-b", "numpy"]) == 1
    assert "one batch size" in capsys.readouterr().err and not (tmp_path / "y.npz").exists()


# Run in a fresh interpreter: the peak resident memory of `coopnn run` alone, over what importing took. The peak is
# the process's VmHWM, not getrusage's ru_maxrss, which Linux carries over from the parent across fork and exec (the
# test process, itself large), so that a run peaking below the parent's peak would read as no growth at all.
PEAK_SCRIPT = """
import re, sys
from coopnn.cli import main
def peak():
    with open("/proc/self/status") as status:
        return int(re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1)) * 1024
before = peak()
code = main(sys.argv[1:])
print("growth", peak() - before)
sys.exit(code)
"""
BIG_FILE_BYTES = 3 << 30
FEATURES = 512


def _pattern(start: int, stop: int) -> np.ndarray:
    """Rows start..stop of the big input: each row its own values."""
    rows = np.arange(start, stop, dtype=np.float64)[:, None]
    return (np.sin(rows * 0.001) + np.linspace(-1, 1, FEATURES)[None, :] * np.cos(rows * 0.37)).astype(np.float32)


@pytest.mark.slow
def test_an_npy_of_a_few_gib_is_streamed_in_bounded_memory(tmp_path):
    rows = BIG_FILE_BYTES // (FEATURES * 4)
    x_path, y_path, model_path = tmp_path / "x.npy", tmp_path / "y.npy", tmp_path / "wide.onnx"
    try:
        x = np.lib.format.open_memmap(x_path, "w+", np.float32, (rows, FEATURES))
        for start in range(0, rows, 1 << 16):
            x[start:start + (1 << 16)] = _pattern(start, min(start + (1 << 16), rows))
            release(x)
        del x
        with coopnn.mlp(FEATURES, [8], 2, backend="numpy", seed=0) as model:
            model.save(model_path)
        proc = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, "run", str(model_path), "-i", str(x_path),
                               "-o", str(y_path), "-b", "numpy"], capture_output=True, text=True, cwd=ROOT,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr
        growth = int(proc.stdout.split("growth")[1].split()[0])
        assert os.path.getsize(x_path) >= BIG_FILE_BYTES and growth < BIG_FILE_BYTES // 8, growth
        assert sum(line.startswith("run [") for line in proc.stderr.splitlines()) == 10
        y = np.load(y_path, mmap_mode="r")
        assert y.shape == (rows, 2)
        chunk = cli_stream.CHUNK_ROWS
        picked = np.unique(np.concatenate([np.random.default_rng(3).integers(0, rows, 2000),
                                           [0, chunk - 1, chunk, rows - 1]]))
        with coopnn.load(model_path, backend="numpy") as model:
            expected = np.concatenate([model.run(_pattern(i, i + 1)) for i in picked])
        np.testing.assert_allclose(y[picked], expected, rtol=1e-5, atol=1e-6)
    finally:
        for path in (x_path, y_path):
            path.unlink(missing_ok=True)
