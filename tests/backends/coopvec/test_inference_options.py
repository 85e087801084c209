"""`InferenceOptions` as a whole and the one the target applies itself (`streaming_rows`): the defaults are the
kernel the target compiles without options, what `describe` names, streamed rows valid SPIR-V with every row load and
store marked Nontemporal, and on a GPU with cooperative vectors against the numpy oracle."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.backends import target
from coopnn.backends.coopvec.inference_options import (DEFAULT_OPTIONS, SHIPPED_OPTIONS, TABLE_OPTIONS,
                                                       InferenceOptions, reads_tables, shipped_options)
from coopnn.errors import CompileError
from coopnn.layouts.formats import weight_format
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.spirv import disassemble
from tests.backends.coopvec.option_kernels import executable_with
from tests.backends.coopvec.test_table_runs import IMAGE_ENCODING
from tests.backends.portable.test_target import spirv_val
from tests.conftest import ROOT

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
STREAMING = InferenceOptions(streaming_rows=True)


def _graph(name: str):
    return optimize(import_model(ROOT / "models" / f"{name}.onnx"))


def test_the_defaults_are_off_and_described_so():
    assert DEFAULT_OPTIONS == InferenceOptions() and DEFAULT_OPTIONS.describe() == "defaults"
    both = InferenceOptions(stage_rows=True, samples_per_invocation=2)
    assert both.describe() == "stage_rows, samples_per_invocation=2"


def test_the_backend_reads_grid_vertices_in_one_load_where_its_weights_are_floats():
    program = lower(_graph("mlp_32_64x4_16"))
    assert SHIPPED_OPTIONS == InferenceOptions(vector_table_reads=True)
    assert (shipped_options(weight_format("fp16"), program) == shipped_options(weight_format("fp8_e4m3"), program)
            == SHIPPED_OPTIONS)
    assert shipped_options(weight_format("int8"), program) == DEFAULT_OPTIONS


def test_a_kernel_reading_tables_reads_neighbouring_vertices_in_one_block():
    with coopnn.mlp(2, [64, 64], 3, encoding=IMAGE_ENCODING, backend="numpy", weights="fp16") as model:
        program = lower(model.graph)
    assert reads_tables(program) and not reads_tables(lower(_graph("mlp_32_64x4_16")))
    assert TABLE_OPTIONS == InferenceOptions(vector_table_reads=True, neighbour_reads=True)
    assert shipped_options(weight_format("fp16"), program) == TABLE_OPTIONS
    assert shipped_options(weight_format("int8"), program) == DEFAULT_OPTIONS


def test_neighbour_reads_need_vector_table_reads():
    with pytest.raises(CompileError, match="neighbour_reads reads table runs as vectors: it needs vector_table_reads"):
        InferenceOptions(neighbour_reads=True)


@pytest.mark.parametrize("io_dtype", ["f32", "f16"])
@pytest.mark.parametrize("name", MODELS)
def test_streamed_rows_pass_spirv_val_with_every_row_access_marked(name, io_dtype, tmp_path):
    """mlp_3_64x2_3: 3 scalar loads and 3 scalar stores a sample; the others one vector load and one vector store."""
    binary = target("coopvec").compile(lower(_graph(name)), FP16, 64, io_dtype=io_dtype, options=STREAMING)
    spirv_val(binary.spirv, tmp_path)
    marked = disassemble(binary.spirv).count("Nontemporal")
    assert marked == (6 if name == "mlp_3_64x2_3" else 2)


@pytest.mark.gpu
@pytest.mark.parametrize("name", MODELS)
def test_streamed_rows_give_the_fp16_reference(coopvec_device, name):
    import coopnn
    from coopnn.interop.device_arrays import run_on_device
    from coopnn.layouts.formats.emulation import run_fp16_emulation

    graph = _graph(name)
    executable = executable_with(graph, 64, STREAMING)
    try:
        name_in, name_out = graph.inputs[0].name, graph.outputs[0].name
        x = np.random.default_rng(9).uniform(-1, 1, (70001, graph.inputs[0].feature_size)).astype(np.float16)
        want = run_fp16_emulation(graph, {name_in: x.astype(np.float32)})[name_out]
        got = {"numpy": executable.run({name_in: x.astype(np.float32)})[name_out],
               "f16": run_on_device(executable, {name_in: coopnn.to_device(x, dtype="float16")})[name_out].numpy()}
        for path, y in got.items():
            np.testing.assert_allclose(y.astype(np.float32), want, rtol=1e-3, atol=2.5e-3, err_msg=path)
    finally:
        executable.close()
