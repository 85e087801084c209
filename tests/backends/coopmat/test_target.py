"""The coopmat target, without a GPU: every zoo module it takes passes spirv-val with nothing beyond
VK_KHR_cooperative_matrix (subgroup-scope matrices, no NV extension), other matrix shapes and tile sizes, the
work-group and its padded activation rows, a column's B tiles loaded once for all its row tiles, the padded weight
buffer, a golden dump of a small MLP, and what it refuses."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from coopnn.backends.coopmat.packing import pack_tiles
from coopnn.backends.coopmat.target import (FEATURES, ROW_PAD, TILE, WORKGROUP_INVOCATIONS, CoopmatTarget, Shape,
                                            local_size, row_stride, shared_halves)
from coopnn.compiler import compile, compile_graph
from coopnn.errors import CompileError
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.ir import Op
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.pack import align_up, unpack
from coopnn.nets.builders import mlp_graph
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.spirv import disassemble
from coopnn.shaders.targets.tile_plan import plan_tiles
from tests.backends.portable.test_target import spirv_val, tiny_mlp
from tests.conftest import ROOT
from tests.shaders.targets.test_tile_plan import ACCEPTED, REFUSED, zoo_program

GOLDEN = Path(__file__).parent / "golden"


def _text(spirv: bytes) -> str:
    return disassemble([int.from_bytes(spirv[i:i + 4], "little") for i in range(0, len(spirv), 4)])


@pytest.mark.parametrize("stem", ACCEPTED)
def test_every_zoo_module_it_takes_passes_spirv_val(stem, tmp_path):
    program = compile(ROOT / "models" / f"{stem}.onnx", target="coopmat")
    spirv_val(program.spirv, tmp_path)
    assert program.workgroup_size == local_size(TILE) and program.binary.features == FEATURES
    text = _text(program.spirv)
    assert re.findall(r'OpExtension "(\w+)"', text) == ["SPV_KHR_cooperative_matrix"]
    subgroup = "%uint_3"  # Scope Subgroup
    assert all(f"%{t} {subgroup} " in f"%{t} {rest}" for t, rest in
               re.findall(r"OpTypeCooperativeMatrixKHR %(\w+) (.*)", text))
    assert text.count("OpReturn\n") == 1  # no early return: every invocation reaches the barriers


@pytest.mark.parametrize("stem", sorted(REFUSED))
def test_the_other_zoo_models_are_refused(stem):
    with pytest.raises(CompileError, match=f"the coopmat target cannot run kernel '{stem}'"):
        compile(ROOT / "models" / f"{stem}.onnx", target="coopmat")


@pytest.mark.parametrize("shape, tile", [(Shape(16, 8, 16), 64), (Shape(16, 16, 16), 32), (Shape(8, 8, 8), 16),
                                         (Shape(16, 16, 16), 128)])
def test_other_shapes_and_tiles_pass_spirv_val(shape, tile, tmp_path):
    program = lower(mlp_graph(5, (40, 24), 3, activation="tanh"))
    spirv_val(CoopmatTarget().compile(program, FP16, tile, shape=shape).spirv, tmp_path)


def test_matrices_are_padded_to_whole_tiles_and_biases_are_tiles_of_identical_rows():
    program = zoo_program("mlp_3_64x2_3")
    packed = pack_tiles(plan_tiles(program, "coopmat"), FP16, 16, 16)
    w0, last = unpack(packed, "w0"), unpack(packed, "w4")
    assert w0.shape == (64, 16) and last.shape == (16, 64)
    np.testing.assert_array_equal(w0[:, :3], program.constants["w0"].astype(np.float16))
    assert not w0[:, 3:].any() and not last[3:].any()
    bias = unpack(packed, "b5")
    assert bias.shape == (16, 16) and not bias[:, 3:].any()
    np.testing.assert_array_equal(bias[:, :3], np.tile(program.constants["b5"].astype(np.float16), (16, 1)))
    assert all(e.offset % 64 == 0 for e in packed.entries.values())  # 16-byte alignment of every tile load


def test_a_work_group_of_256_invocations_takes_a_tile_of_64_samples():
    """The runtime dispatches a work-group per `workgroup_size[0]` samples: the tile is x, the other invocations y."""
    assert (TILE, WORKGROUP_INVOCATIONS) == (64, 256)
    assert local_size(TILE) == (64, 4, 1) and local_size(TILE, 128) == (64, 2, 1)
    assert local_size(16) == (16, 16, 1) and local_size(256) == (256, 1, 1) and local_size(512) == (512, 1, 1)
    binary = CoopmatTarget().compile(zoo_program("mlp_3_64x2_3"), FP16)
    assert binary.workgroup_size == (64, 4, 1)
    assert "OpExecutionMode %main LocalSize 64 4 1" in _text(binary.spirv)
    fewer = CoopmatTarget().compile(zoo_program("mlp_3_64x2_3"), FP16, invocations=128)
    assert "OpExecutionMode %main LocalSize 64 2 1" in _text(fewer.spirv)


def test_workgroup_memory_holds_two_buffers_of_padded_rows_of_the_widest_layer():
    plan = plan_tiles(zoo_program("mlp_64_128x4_16"), "coopmat")
    assert ROW_PAD == 8 and row_stride(plan, Shape()) == 128 + 8
    assert shared_halves(plan, TILE, Shape()) == 2 * 64 * (128 + 8)  # 34,816 bytes
    for stem, width in (("mlp_3_64x2_3", 64), ("mlp_64_128x4_16", 128)):
        stride = row_stride(plan_tiles(zoo_program(stem), "coopmat"), Shape())
        # rows 16-byte aligned (a matrix load's rows), consecutive rows starting on different banks
        assert stride == width + ROW_PAD and 2 * stride % 16 == 0 and 2 * stride % 128 == 16
    assert row_stride(plan_tiles(zoo_program("mlp_3_64x2_3"), "coopmat"), Shape(8, 8, 8)) == 64 + 8


def test_a_column_loads_its_b_tiles_once_for_every_row_tile():
    """Per product and column tile: a bias tile and K/16 B tiles, then TILE/16 row tiles of K/16 A tiles and
    products each (a column-owner subgroup keeps its B tiles while it runs the rows)."""
    program = zoo_program("mlp_64_128x4_16")
    plan = plan_tiles(program, "coopmat")
    text = _text(CoopmatTarget().compile(program, FP16).spirv)
    steps = [align_up(s.columns, 16) // 16 for s in plan.products]
    rows = TILE // 16
    assert text.count("OpCooperativeMatrixMulAddKHR") == rows * sum(steps)
    biases = sum(s.bias is not None for s in plan.products)
    assert text.count("= OpCooperativeMatrixLoadKHR") == biases + sum(steps) + rows * sum(steps)
    assert text.count("OpCooperativeMatrixStoreKHR") == rows * len(plan.products)


def test_golden_dump_of_a_small_mlp(tmp_path):
    program = compile_graph(tiny_mlp(), target_name="coopmat")
    spirv_val(program.spirv, tmp_path)
    text = program.text + "\n" + program.spvasm()
    golden = GOLDEN / "coopmat_tiny_mlp.txt"
    if not golden.exists():
        golden.write_text(text)
        pytest.fail(f"wrote the missing golden file {golden}: review it and commit it")
    assert text == golden.read_text(), f"if the change is intended, delete {golden}, rerun, review and commit"


def test_an_epilogue_infinite_at_zero_on_padding_is_refused():
    b = GraphBuilder("log_layer")
    x = b.input("x", 4)
    h = b.node(Op.LINEAR, "fc", [x, b.constant("w", np.ones((3, 4)))])
    y = b.node(Op.LINEAR, "out", [b.node(Op.LOG, "log", [h]), b.constant("w2", np.ones((2, 3)))])
    with pytest.raises(CompileError, match="the epilogue of the 3-wide layer %1 is not finite at 0, so its padding "
                                           "columns \\(to 16\\) would turn the next product into NaN"):
        compile_graph(b.graph([y]), target_name="coopmat")


def test_shapes_and_tiles_it_cannot_use_are_refused():
    program = lower(tiny_mlp())
    with pytest.raises(CompileError, match="shapes whose N and K divide each other"):
        CoopmatTarget().compile(program, FP16, shape=Shape(16, 16, 24))
    with pytest.raises(CompileError, match="tiles of a whole number of 16 samples .* not 40"):
        CoopmatTarget().compile(program, FP16, 40)
