"""Table runs read as vectors (`InferenceOptions.vector_table_reads`): valid SPIR-V for every encoding test model,
one load a grid vertex where its features are 2 or 4, and on a GPU with cooperative
vectors every encoding test model against the float16 reference."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import coopnn
from coopnn.backends import target
from coopnn.backends.coopvec.inference_options import InferenceOptions
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.spirv import disassemble
from tests.backends.coopvec.option_kernels import executable_with
from tests.backends.portable.test_target import spirv_val
from tests.shaders.targets.encoding_cases import EVERY, EVERY_IDS, fp16_reference, inputs, kernel_model

RUNS = InferenceOptions(vector_table_reads=True)
IMAGE_ENCODING = {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 15,
                  "base_resolution": 16, "per_level_scale": 1.5}


@pytest.mark.parametrize("config, n_in", EVERY, ids=EVERY_IDS)
def test_every_encoding_test_model_passes_spirv_val(config, n_in, tmp_path):
    model, _ = kernel_model(config, n_in, "numpy")
    with model:
        program = lower(model.graph)
    spirv_val(target("coopvec").compile(program, FP16, 64, options=RUNS).spirv, tmp_path)


def test_a_vertex_of_two_features_is_one_load():
    """tcnn's image grid: 16 levels x 4 corners, two float16 features each: 64 table loads instead of 128."""
    with coopnn.mlp(2, [64, 64], 3, encoding=IMAGE_ENCODING, backend="numpy", weights="fp16") as model:
        program = lower(model.graph)
    default = disassemble(target("coopvec").compile(program, FP16, 64).spirv).count("OpLoad")
    runs = disassemble(target("coopvec").compile(program, FP16, 64, options=RUNS).spirv).count("OpLoad")
    assert default - runs == 16 * 4


@pytest.mark.gpu
@pytest.mark.parametrize("options", [RUNS, replace(RUNS, stage_elements=True), replace(RUNS, samples_per_invocation=2)],
                         ids=["runs", "runs-staged-elements", "runs-pairs"])
@pytest.mark.parametrize("config, n_in", EVERY, ids=EVERY_IDS)
def test_every_encoding_test_model_gives_the_fp16_reference(coopvec_device, config, n_in, options):
    """Also with the encoded inputs staged element by element and with two samples an invocation, the variants the
    benchmark times on tcnn's image configuration."""
    model, _ = kernel_model(config, n_in, "coopvec")
    with model:
        graph = model.graph
    executable = executable_with(graph, 64, options)
    try:
        x = inputs(config, n_in)
        got = executable.run({graph.inputs[0].name: x})[graph.outputs[0].name]
    finally:
        executable.close()
    np.testing.assert_allclose(got, fp16_reference(graph, x), rtol=1e-3, atol=2.5e-3)
