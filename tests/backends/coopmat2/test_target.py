"""The coopmat2 target, without a GPU: every zoo module it takes passes spirv-val (workgroup-scope matrices
included) in every weight format, its steps run in numpy through the tensor-addressing model give the tile kernels'
float16 arithmetic (`tests.backends.tile_reference`) at ragged batch sizes (every load and store inside its buffer,
every output element written once), a golden dump of a small MLP, the tensor layouts in the text form, and what it
refuses. The block formats' decoding and the DecodeVectorFunc variant: `test_block_formats.py`."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from coopnn.backends.coopmat2.steps import Apply, Load, MulAdd, Store, tile_kernel
from coopnn.backends.coopmat2.target import GRANULARITY, TILE, Coopmat2Target, features, pack_program
from coopnn.compiler import compile, compile_graph
from coopnn.errors import CompileError
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.ir import Op
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.emulation import run_fp16_emulation
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.nets.builders import mlp_graph
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.spirv import disassemble
from coopnn.shaders.targets.tile_plan import plan_tiles
from tests.backends.coopmat2.kernel_model import run_steps
from tests.backends.tile_reference import run_tile_emulation
from tests.backends.portable.test_target import spirv_val, tiny_mlp
from tests.conftest import ROOT
from tests.shaders.targets.test_tile_plan import ACCEPTED, REFUSED

GOLDEN = Path(__file__).parent / "golden"
FORMATS = ("fp16", "q8_0", "q4_0")
RTOL, ATOL = 1e-3, 2.5e-3  # as the GPU tests: the float32 sums of the products are in another order


def _graph(stem: str):
    return optimize(import_model(ROOT / "models" / f"{stem}.onnx"))


def _words(spirv: bytes) -> list[int]:
    return [int.from_bytes(spirv[i:i + 4], "little") for i in range(0, len(spirv), 4)]


@pytest.mark.parametrize("weights", FORMATS)
@pytest.mark.parametrize("stem", ACCEPTED)
def test_every_zoo_module_it_takes_passes_spirv_val(stem, weights, tmp_path):
    program = compile(ROOT / "models" / f"{stem}.onnx", target="coopmat2", weights=weights)
    spirv_val(program.spirv, tmp_path)
    assert program.workgroup_size == (TILE, 1, 1) and [p.name for p in program.push_constants] == ["count"]
    assert program.binary.features == features(weight_format(weights))
    text = disassemble(_words(program.spirv))
    workgroup = "%uint_2"  # Scope Workgroup
    assert re.search(rf"OpTypeCooperativeMatrixKHR %half {workgroup} ", text)
    assert "OpCooperativeMatrixLoadTensorNV" in text and "OpCooperativeMatrixStoreTensorNV" in text
    assert "OpReturn\n" in text and text.count("OpReturn\n") == 1  # no early return: every invocation takes part


@pytest.mark.parametrize("stem", sorted(REFUSED))
def test_the_other_zoo_models_are_refused(stem):
    with pytest.raises(CompileError, match=f"the coopmat2 target cannot run kernel '{stem}'"):
        compile(ROOT / "models" / f"{stem}.onnx", target="coopmat2")


@pytest.mark.parametrize("weights", FORMATS)
@pytest.mark.parametrize("stem", ACCEPTED)
def test_the_steps_in_numpy_give_the_tile_emulation_at_ragged_batches(stem, weights):
    check_steps_at_ragged_batches(stem, weight_format(weights))


def check_steps_at_ragged_batches(stem: str, fmt, decode_vector: int | None = None) -> None:
    """The kernel model against `run_tile_emulation` at 1, 17, 1000 (and for one model 2^16 + 3) samples."""
    graph = _graph(stem)
    program = lower(graph)
    kernel = tile_kernel(plan_tiles(program, "coopmat2"), TILE, GRANULARITY, fmt, decode_vector)
    packed = pack_program(program, fmt)
    batches = (1, 17, 1000, (1 << 16) + 3) if stem == "mlp_3_64x2_3" else (1, 17, 1000)
    for batch in batches:
        x = np.random.default_rng(batch).uniform(-1, 1, (batch, graph.inputs[0].feature_size)).astype(np.float32)
        got = run_steps(kernel, packed, x)
        want = run_tile_emulation(graph, {graph.inputs[0].name: x}, fmt)[graph.outputs[0].name].reshape(batch, -1)
        assert not np.isnan(got).any(), "an output element was never stored"
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{stem} at {batch} samples")


def test_layouts_clamp_the_tile_to_the_batch_and_the_padding_to_the_tensor():
    kernel = tile_kernel(plan_tiles(lower(_graph("mlp_3_64x2_3")), "coopmat2"), TILE, GRANULARITY, FP16)
    loads = {s.result: s for s in kernel.steps if isinstance(s, Load)}
    batch = TILE + 6  # the second tile holds 6 samples
    layout = loads["0"].layout.numpy({"n": batch, "i": TILE})
    assert (layout.dimension, layout.offset, layout.span, layout.clamp_mode.value) == ((batch, 3), (TILE, 0),
                                                                                        (TILE, 16), "Constant")
    weights = loads["B1"].layout.numpy({})
    assert (weights.dimension, weights.span) == ((64, 3), (64, 16)) and loads["B1"].view.permutation == (1, 0)
    assert loads["bias1"].view.stride == (0, 1)
    (store,) = [s for s in kernel.steps if isinstance(s, Store)]
    assert store.layout.numpy({"n": batch, "i": TILE}).dimension == (batch, 3)


def test_a_stage_whose_epilogue_of_zero_is_infinite_masks_its_padding():
    b = GraphBuilder("log_layer")
    x = b.input("x", 4)
    h = b.node(Op.LINEAR, "fc", [x, b.constant("w", np.full((3, 4), 0.5)), b.constant("b", np.ones(3))])
    y = b.node(Op.LINEAR, "out", [b.node(Op.LOG, "log", [h]), b.constant("w2", np.ones((2, 3)))], output="y")
    graph = b.graph([y])
    program = lower(graph)
    kernel = tile_kernel(plan_tiles(program, "coopmat2"), TILE, GRANULARITY, FP16)
    assert [s.mask for s in kernel.steps if isinstance(s, Apply)] == [3, None]
    x = np.random.default_rng(0).uniform(0, 1, (20, 4)).astype(np.float32)
    got = run_steps(kernel, pack_program(program, FP16), x)
    np.testing.assert_allclose(got, run_fp16_emulation(graph, {"x": x})["y"], rtol=RTOL, atol=ATOL)
    assert "%keep = cmp.lt %c, 3 : bool" in compile_graph(graph, target_name="coopmat2").text


def test_layers_wider_than_a_block_are_sums_of_block_products():
    """90 inputs, 150 hidden (log: its padding masked, in the third block only), 70 outputs: blocks of 64 and the
    rest on every side, each output block the sum over the input's blocks in ascending order; the steps in numpy
    give the emulation."""
    rng = np.random.default_rng(4)
    b = GraphBuilder("wide")
    x = b.input("x", 90)
    h = b.node(Op.LINEAR, "fc", [x, b.constant("w", rng.uniform(0, 0.1, (150, 90))), b.constant("b", np.ones(150))])
    y = b.node(Op.LINEAR, "out", [b.node(Op.LOG, "log", [h]), b.constant("w2", rng.normal(size=(70, 150)))],
               output="y")
    graph = b.graph([y])
    program = lower(graph)
    kernel = tile_kernel(plan_tiles(program, "coopmat2"), TILE, GRANULARITY, FP16)
    loads = [(s.result, s.layout.offset, s.type.rows, s.type.cols) for s in kernel.steps
             if isinstance(s, Load) and s.param == "w0"]
    assert loads == [("B1_0_0", (0, 0), 64, 64), ("B1_1_0", (0, 64), 32, 64), ("B1_0_1", (64, 0), 64, 64),
                     ("B1_1_1", (64, 64), 32, 64), ("B1_0_2", (128, 0), 64, 32), ("B1_1_2", (128, 64), 32, 32)]
    sums = [(s.result, s.a, s.b, s.c) for s in kernel.steps if isinstance(s, MulAdd) and s.b.startswith("B1_")]
    assert sums[:2] == [("P1_0_0", "A1_0", "B1_0_0", "C1_0"), ("1_0", "A1_1", "B1_1_0", "P1_0_0")]
    assert [s.mask for s in kernel.steps if isinstance(s, Apply)] == [None, None, 22, None, None]
    assert [s.layout.offset for s in kernel.steps if isinstance(s, Store)] == [("i", 0), ("i", 64)]
    x = rng.uniform(0, 1, (70, 90)).astype(np.float32)
    got = run_steps(kernel, pack_program(program, FP16), x)
    np.testing.assert_allclose(got, run_fp16_emulation(graph, {"x": x})["y"], rtol=RTOL, atol=ATOL)


def test_the_text_form_shows_the_tensor_layouts():
    text = compile(ROOT / "models" / "mlp_3_64x2_3.onnx", target="coopmat2").text
    for line in ("foreach_tile (%i) = (%c0), (%n) as (%ti) <= (128) {",
                 "%L1 = tensor_layout<2,constant> dims [%n, 3] slice [%i:+128, 0:+16]",
                 "%0 = cooperative_matrix_load %in0[%L1] : coopmatrix<f32x128x16,matrix_acc>",
                 "%A1 = cast %0 : coopmatrix<f16x128x16,matrix_a>",
                 "%V2 = tensor_view<2> permute [1, 0]",
                 "%B1 = cooperative_matrix_load %w0[%L2, %V2] : coopmatrix<f16x16x64,matrix_b>",
                 "%V3 = tensor_view<2> dims [128, 64] strides [0, 1]",
                 "%1 = cooperative_matrix_mul_add %A1, %B1, %C1 : coopmatrix<f32x128x64,matrix_acc>",
                 "%3 = cooperative_matrix_apply (%r,%c,%v)=%1 -> coopmatrix<f32x128x64,matrix_acc> {",
                 "%3 = max %x, %2 : f32",
                 "cooperative_matrix_store %y3, %out7[%L8]"):
        assert line in text, line


def test_golden_dump_of_a_small_mlp(tmp_path):
    program = compile_graph(tiny_mlp(), target_name="coopmat2")
    spirv_val(program.spirv, tmp_path)
    text = program.text + "\n" + program.spvasm()
    golden = GOLDEN / "coopmat2_tiny_mlp.txt"
    if not golden.exists():
        golden.write_text(text)
        pytest.fail(f"wrote the missing golden file {golden}: review it and commit it")
    assert text == golden.read_text(), f"if the change is intended, delete {golden}, rerun, review and commit"


def test_tiles_of_other_sizes_and_granularities_pass_spirv_val(tmp_path):
    program = lower(mlp_graph(5, (40, 24), 3, activation="tanh"))
    for tile, granularity in ((32, 16), (64, 16), (256, 32)):
        spirv_val(Coopmat2Target().compile(program, FP16, tile, granularity=granularity).spirv, tmp_path)


def test_a_tile_of_part_rows_and_other_weight_formats_are_refused():
    with pytest.raises(CompileError, match="tiles of a whole number of 16 samples .* not 40"):
        compile_graph(tiny_mlp(), target_name="coopmat2", workgroup_size=40)
    with pytest.raises(CompileError, match="the coopmat2 target stores weights as fp16 or q8_0 or q4_0, not 'fp32'"):
        compile_graph(tiny_mlp(), target_name="coopmat2", weights="fp32")
