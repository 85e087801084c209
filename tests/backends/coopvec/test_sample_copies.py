"""Several samples an invocation (`InferenceOptions.samples_per_invocation`): valid SPIR-V for the benchmark MLPs and
tcnn's image configuration, the binary sized in samples, the options it does not combine with refused, and on a GPU
with cooperative vectors the kernels against the numpy oracle (batches ending inside an invocation)."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.backends import target
from coopnn.backends.coopvec.inference_options import InferenceOptions
from coopnn.backends.coopvec.target import MAX_SAMPLE_COMPONENTS
from coopnn.errors import CompileError
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.spirv import disassemble
from tests.backends.coopvec.option_kernels import assert_gives_the_fp16_reference, executable_with
from tests.backends.portable.test_target import spirv_val
from tests.conftest import ROOT

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
# (model, samples an invocation) the target takes: at most MAX_SAMPLE_COMPONENTS components of the widest layer
TAKEN = [(name, count) for name in MODELS + ("image",) for count in (2, 4)
         if (name, count) != ("mlp_64_128x4_16", 4)]
IMAGE_ENCODING = {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 15,
                  "base_resolution": 16, "per_level_scale": 1.5}


def _graph(name: str):
    if name == "image":
        with coopnn.mlp(2, [64, 64], 3, encoding=IMAGE_ENCODING, backend="numpy", weights="fp16") as model:
            return model.graph
    return optimize(import_model(ROOT / "models" / f"{name}.onnx"))


@pytest.mark.parametrize("io_dtype", ["f32", "f16"])
@pytest.mark.parametrize("name, count", TAKEN)
def test_several_samples_an_invocation_pass_spirv_val(name, count, io_dtype, tmp_path):
    options = InferenceOptions(samples_per_invocation=count, vector_table_reads=name == "image")
    binary = target("coopvec").compile(lower(_graph(name)), FP16, 64, io_dtype=io_dtype, options=options)
    assert binary.workgroup_size == (64 * count, 1, 1)
    text = disassemble(binary.spirv)
    assert "LocalSize 64 1 1" in text and text.count("OpCooperativeVectorMatrixMulAddNV") % count == 0
    spirv_val(binary.spirv, tmp_path)


@pytest.mark.parametrize("count", [2, 4])
def test_only_the_first_sample_returns_early_and_the_others_store_inside_the_batch(count):
    """One early return (the first sample past the batch), and a guarded store for each other sample."""
    text = disassemble(target("coopvec").compile(lower(_graph("mlp_3_64x2_3")), FP16, 64,
                                                 options=InferenceOptions(samples_per_invocation=count)).spirv)
    assert text.count("OpReturn") == 2 and text.count("OpSelectionMerge") == count
    assert text.count("OpULessThan") == count - 1


def test_other_counts_and_staged_rows_are_refused():
    with pytest.raises(CompileError, match="1, 2 or 4"):
        InferenceOptions(samples_per_invocation=3)
    with pytest.raises(CompileError, match="one sample an invocation"):
        target("coopvec").compile(lower(_graph("mlp_32_64x4_16")), FP16, 64,
                                  options=InferenceOptions(stage_rows=True, samples_per_invocation=2))


def test_more_components_an_invocation_than_the_driver_builds_are_refused():
    assert 128 * 4 > MAX_SAMPLE_COMPONENTS
    with pytest.raises(CompileError, match=r"samples_per_invocation=4 with layers 128 wide .* \(use 2 or fewer"):
        target("coopvec").compile(lower(_graph("mlp_64_128x4_16")), FP16, 64,
                                  options=InferenceOptions(samples_per_invocation=4))


@pytest.mark.gpu
@pytest.mark.parametrize("name, count", [case for case in TAKEN if case[0] != "image"])
def test_several_samples_an_invocation_give_the_fp16_reference(coopvec_device, name, count):
    """From numpy (the host path's chunks), float32 and float16 device arrays; 70001 samples: the last invocation
    has one."""
    graph = _graph(name)
    options = InferenceOptions(samples_per_invocation=count)
    assert_gives_the_fp16_reference(executable_with(graph, 64, options), graph, 7)
