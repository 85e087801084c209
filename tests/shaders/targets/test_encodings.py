"""The encodings' SPIR-V (`coopnn.shaders.targets.encodings`) without a device: one emission per otype the graph
has, every encoding test model's kernel lowers to one `encode` feeding the first product, the interpreter runs it as
the numpy backend does, the tile plans take it as their per-sample input stage, and the portable, coopvec, coopmat
and coopmat2 modules of every model pass spirv-val."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.backends import target
from coopnn.backends.coopvec.layouts import pack_plan
from coopnn.backends.coopvec.products import weight_plan
from coopnn.compiler import compile_graph
from coopnn.errors import CompileError
from coopnn.graph.encodings.registry import _classes
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.shaders.kernel.interpret import run_program
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.targets.encodings.registry import emitters
from coopnn.shaders.targets.tile_plan import plan_tiles
from tests.backends.portable.test_target import spirv_val
from tests.shaders.targets.encoding_cases import ENCODINGS, EVERY, EVERY_IDS, IDS, inputs, model_for


def test_every_encoding_has_an_emission():
    assert set(emitters()) == {cls.otype for cls in _classes().values()}


@pytest.mark.parametrize("config, n_in", ENCODINGS, ids=IDS)
def test_the_kernel_encodes_into_the_first_product(config, n_in):
    model = model_for(config, n_in)
    program = lower(model.graph)
    ops = [i.op for i in program.body if i.op not in ("constant",)]
    assert ops[:3] == ["load", "encode", "gemv"]
    encode, gemv = (next(i for i in program.body if i.op == op) for op in ("encode", "gemv"))
    assert gemv.args[1] == encode.result and encode.attrs["encoding"] == model.graph.nodes[0].attrs["encoding"]
    x = inputs(config, n_in)
    got = run_program(program, {"x": x})[model.outputs[0].name]
    np.testing.assert_allclose(got, model.run(x), rtol=1e-5, atol=1e-6)


def test_the_parameter_vector_keeps_the_graph_constants_name():
    model = model_for(*ENCODINGS[6])
    program = lower(model.graph)
    encode = next(i for i in program.body if i.op == "encode")
    assert program.sources[encode.args[1]] == ("encoding.params",)


@pytest.mark.parametrize("config, n_in", EVERY, ids=EVERY_IDS)
def test_portable_and_coopvec_modules_pass_spirv_val(config, n_in, tmp_path):
    program = lower(model_for(config, n_in).graph)
    spirv_val(target("portable").compile(program, FP32).spirv, tmp_path)
    spirv_val(target("portable").compile(program, FP16).spirv, tmp_path)
    spirv_val(target("coopvec").compile(program, FP16, packed=pack_plan(weight_plan(program, FP16))).spirv,
              tmp_path)


@pytest.mark.parametrize("config, n_in", EVERY, ids=EVERY_IDS)
def test_tile_modules_pass_spirv_val(config, n_in, tmp_path):
    program = lower(model_for(config, n_in).graph)
    for name in ("coopmat", "coopmat2"):
        spirv_val(target(name).compile(program, FP16).spirv, tmp_path)


def test_the_tile_plan_runs_the_encoding_per_sample():
    model = model_for(*ENCODINGS[6])
    plan = plan_tiles(lower(model.graph), "coopmat")
    assert [i.op for i in plan.input_stage] == ["encode"]
    assert plan.stages[0].width == model.graph.nodes[0].attrs["encoding"].n_output_dims
    assert plan.stages[0].epilogue == () and len(plan.products) == 2


@pytest.mark.parametrize("name", ["portable", "coopvec"])
def test_int8_weights_are_refused_for_a_grids_tables_naming_the_encoding(name):
    """int8 packs each Linear as one entry of its own arithmetic; a grid's tables have no place there."""
    config, n_in = ENCODINGS[6]
    model = model_for(config, n_in)
    calibration = np.random.default_rng(0).random((64, n_in), dtype=np.float32)
    with pytest.raises(CompileError, match=r"parameters of Grid\(type=Hash.*, not int8"):
        compile_graph(model.graph, target_name=name, weights="int8", calibration=calibration)
    compile_graph(model_for(*ENCODINGS[0]).graph, target_name=name, weights="int8", calibration=calibration[:, :2])
