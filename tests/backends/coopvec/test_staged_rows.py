"""Rows through workgroup memory (`InferenceOptions.stage_rows`, `pad_rows`): which bindings are staged, valid
SPIR-V for every benchmark MLP, workgroup size and row dtype, the defaults unchanged, and on a GPU with cooperative
vectors the staged kernels against the numpy oracle (batches that end inside a work-group)."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.backends import target
from coopnn.backends.coopvec.inference_options import DEFAULT_OPTIONS, InferenceOptions
from coopnn.backends.coopvec.staged_rows import WORKGROUP_MEMORY_LIMIT
from coopnn.errors import CompileError
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.spirv import disassemble
from tests.backends.coopvec.option_kernels import assert_gives_the_fp16_reference, executable_with
from tests.backends.portable.test_target import spirv_val
from tests.conftest import ROOT

STAGED = InferenceOptions(stage_rows=True)
PADDED = InferenceOptions(stage_rows=True, pad_rows=True)
ELEMENTS = InferenceOptions(stage_elements=True)
EVERY_ROW = InferenceOptions(stage_rows=True, stage_elements=True)
MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16")
MIXED = "mlp_16_32_3"  # 16 inputs (whole words, staged) and 3 outputs (stored directly)


def _graph(name: str):
    """A benchmark MLP of models/, or `MIXED`."""
    if name == MIXED:
        import coopnn

        with coopnn.mlp(16, [32], 3, backend="numpy", weights="fp16") as model:
            return model.graph
    return optimize(import_model(ROOT / "models" / f"{name}.onnx"))


def _stage_bytes(name: str, io_dtype: str, options: InferenceOptions) -> int:
    """Workgroup memory a sample's staged rows take: inputs and outputs of whole 16-byte words, padded or not."""
    graph = _graph(name)
    rows = [v.feature_size * (2 if io_dtype == "f16" else 4) for v in graph.inputs + graph.outputs]
    return sum(row + 16 * options.pad_rows if row % 16 == 0 else row for row in rows
               if (options.stage_rows if row % 16 == 0 else options.stage_elements))


@pytest.mark.parametrize("io_dtype", ["f32", "f16"])
@pytest.mark.parametrize("size", [32, 64, 128, 256])
@pytest.mark.parametrize("options", [STAGED, PADDED, ELEMENTS, EVERY_ROW], ids=["staged", "padded", "elements", "every"])
@pytest.mark.parametrize("name", MODELS + (MIXED,))
def test_staged_kernels_pass_spirv_val(name, options, size, io_dtype, tmp_path):
    program = lower(_graph(name))
    if size * _stage_bytes(name, io_dtype, options) > WORKGROUP_MEMORY_LIMIT:
        with pytest.raises(CompileError, match="workgroup memory"):
            target("coopvec").compile(program, FP16, size, io_dtype=io_dtype, options=options)
        return
    binary = target("coopvec").compile(program, FP16, size, io_dtype=io_dtype, options=options)
    spirv_val(binary.spirv, tmp_path)


@pytest.mark.parametrize("io_dtype", ["f32", "f16"])
def test_rows_of_whole_words_are_staged_and_the_early_return_goes(io_dtype):
    """mlp_32_64x4_16: 32 inputs and 16 outputs, whole words in both dtypes: two stages, a barrier after the copy in
    and one before the copy out, each invocation's row read and written in workgroup memory, nothing returned early."""
    program = lower(_graph("mlp_32_64x4_16"))
    text = disassemble(target("coopvec").compile(program, FP16, 64, io_dtype=io_dtype, options=STAGED).spirv)
    assert text.count("OpControlBarrier") == 2
    assert text.count("OpReturn") == 1
    assert "Workgroup" in text and "LocalInvocationIndex" in text
    words_in, words_out = (32 * (2 if io_dtype == "f16" else 4)) // 16, (16 * (2 if io_dtype == "f16" else 4)) // 16
    # a load and a store a word copied each way, plus each invocation's own row read and written
    assert text.count("OpCooperativeVectorLoadNV") == words_in + words_out + 1
    assert text.count("OpCooperativeVectorStoreNV") == words_in + words_out + 1


@pytest.mark.parametrize("io_dtype", ["f32", "f16"])
def test_rows_not_of_whole_words_leave_the_kernel_as_it_was(io_dtype):
    """mlp_3_64x2_3 reads and writes 3 values a sample: nothing is staged, and the kernel is the default one byte for
    byte, as it is for every model with the options off."""
    program = lower(_graph("mlp_3_64x2_3"))
    default = target("coopvec").compile(program, FP16, 64, io_dtype=io_dtype)
    assert target("coopvec").compile(program, FP16, 64, io_dtype=io_dtype, options=PADDED).spirv == default.spirv
    assert target("coopvec").compile(program, FP16, 64, io_dtype=io_dtype, options=DEFAULT_OPTIONS).spirv == \
        default.spirv


@pytest.mark.parametrize("io_dtype", ["f32", "f16"])
def test_a_staged_input_beside_an_output_stored_directly_passes_spirv_val(io_dtype, tmp_path):
    """16 inputs (whole words) and 3 outputs (not): the input staged, the output stored by invocations in the batch
    only, since no invocation returns early."""
    program = lower(_graph(MIXED))
    text = disassemble(target("coopvec").compile(program, FP16, 64, io_dtype=io_dtype, options=STAGED).spirv)
    # the copy in guards each of its 4 (f32) or 2 (f16) turns, and the output store is guarded too
    assert text.count("OpControlBarrier") == 1
    assert text.count("OpSelectionMerge") == (64 if io_dtype == "f32" else 32) // 16 + 1
    spirv_val(target("coopvec").compile(program, FP16, 64, io_dtype=io_dtype, options=PADDED).spirv, tmp_path)


@pytest.mark.parametrize("io_dtype", ["f32", "f16"])
def test_rows_of_three_values_are_staged_element_by_element(io_dtype):
    """mlp_3_64x2_3 with stage_elements: its 3 input and 3 output values a sample copied through workgroup memory, a
    barrier each way, nothing returned early."""
    program = lower(_graph("mlp_3_64x2_3"))
    text = disassemble(target("coopvec").compile(program, FP16, 64, io_dtype=io_dtype, options=ELEMENTS).spirv)
    assert text.count("OpControlBarrier") == 2 and text.count("OpReturn") == 1
    assert "Workgroup" in text and "LocalInvocationIndex" in text


def test_too_much_workgroup_memory_is_refused_naming_the_option():
    program = lower(_graph("mlp_64_128x4_16"))
    with pytest.raises(CompileError, match="stage_rows off"):
        target("coopvec").compile(program, FP16, 256, options=PADDED)


@pytest.mark.gpu
@pytest.mark.parametrize("size", [64, 128])
@pytest.mark.parametrize("options", [STAGED, PADDED, ELEMENTS, EVERY_ROW], ids=["staged", "padded", "elements", "every"])
@pytest.mark.parametrize("name", MODELS + (MIXED,))
def test_staged_kernels_give_the_fp16_reference(coopvec_device, name, options, size):
    """From numpy (the host path's chunks), from float32 and from float16 device arrays, a batch ending inside a
    work-group, against the oracle of float16-rounded weights and inputs."""
    graph = _graph(name)
    assert_gives_the_fp16_reference(executable_with(graph, size, options), graph, 3)
