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
NEIGHBOURS = replace(RUNS, neighbour_reads=True)
IMAGE_ENCODING = {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 15,
                  "base_resolution": 16, "per_level_scale": 1.5}


@pytest.mark.parametrize("config, n_in", EVERY, ids=EVERY_IDS)
def test_every_encoding_test_model_passes_spirv_val(config, n_in, tmp_path):
    model, _ = kernel_model(config, n_in, "numpy")
    with model:
        program = lower(model.graph)
    for options in (RUNS, NEIGHBOURS):
        spirv_val(target("coopvec").compile(program, FP16, 64, options=options).spirv, tmp_path)


def test_neighbouring_vertices_of_two_features_are_one_block_load_and_a_pair_where_apart():
    """tcnn's image grid: 16 levels x 2 neighbour pairs of corners, each the load of its aligned 8-byte block and,
    inside a branch taken where the second corner is outside it, that corner's 4-byte pair: no element loads."""
    with coopnn.mlp(2, [64, 64], 3, encoding=IMAGE_ENCODING, backend="numpy", weights="fp16") as model:
        program = lower(model.graph)
    default = disassemble(target("coopvec").compile(program, FP16, 64).spirv)
    runs = disassemble(target("coopvec").compile(program, FP16, 64, options=NEIGHBOURS).spirv)
    loads = lambda text, kind: sum(f"OpLoad %{kind} " in line for line in text.splitlines())  # noqa: E731
    assert loads(runs, "v4half") == loads(runs, "v2half") == 16 * 2
    assert loads(runs, "half") == loads(default, "half") - 16 * 4 * 2


@pytest.mark.gpu
@pytest.mark.parametrize("options", [RUNS, NEIGHBOURS, replace(RUNS, stage_elements=True),
                                     replace(RUNS, samples_per_invocation=2),
                                     replace(NEIGHBOURS, samples_per_invocation=2)],
                         ids=["runs", "neighbours", "runs-staged-elements", "runs-pairs", "neighbours-pairs"])
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
