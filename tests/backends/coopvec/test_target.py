"""The cooperative-vector target without a GPU: every zoo module passes spirv-val in every weight layout, the
instructions it chooses (whole vectors, float16 where exact, padding of odd sizes), its requirements, golden dumps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import coopnn
from coopnn.compiler import compile, compile_graph
from coopnn.layouts.formats.calibration import calibrated
from coopnn.errors import CompileError
from coopnn.backends.coopvec.layouts import pack_plan
from coopnn.shaders.spirv import disassemble
from coopnn.backends import target
from coopnn.backends.coopvec.backend import CoopvecBackend
from coopnn.backends.coopvec.products import combination, requirements, weight_plan
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from tests.conftest import ROOT, ZOO, random_feeds
from tests.backends.portable.test_target import encoding, spirv_val, tiny_mlp

GOLDEN = Path(__file__).parent / "golden"
VALIDATED: list[str] = []


def _driver_double(matrix: np.ndarray) -> bytes:
    """Stands in for vkConvertCooperativeVectorMatrixNV: a driver whose optimal layout is row-major plus a tail."""
    return matrix.tobytes() + bytes(64)


def _packed(program, layout: str, fmt=FP16):
    plan = weight_plan(program, fmt)
    return pack_plan(plan, layout, _driver_double if layout == "inferencing_optimal" else None)


def _counts(program, *opnames: str) -> dict[str, int]:
    lines = program.spvasm().splitlines()
    return {op: sum(1 for line in lines if f" {op} " in f" {line} ") for op in opnames}


@pytest.mark.parametrize("fmt", CoopvecBackend.formats, ids=lambda f: f.name)
@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_every_zoo_module_passes_spirv_val_in_every_layout_and_format(path, fmt, tmp_path):
    calibration = None
    if fmt.input_quantization is not None:
        with coopnn.load(path, backend="numpy") as model:
            calibration = random_feeds(model, 64, seed=2)
    program = compile(path, target="coopvec", weights=fmt.name, calibration=calibration)
    fmt = calibrated(fmt, program.graph, calibration)
    assert program.binary.target == "coopvec" and program.workgroup_size == (64, 1, 1)
    assert [b.dtype for b in program.bindings[1:]] == ["f32"] * (len(program.bindings) - 1)
    for layout in ("row_major", "column_major", "inferencing_optimal"):
        binary = target("coopvec").compile(program.kernel, fmt, 64, packed=_packed(program.kernel, layout, fmt))
        spirv_val(binary.spirv, tmp_path)
        VALIDATED.append(f"{path.stem}/{fmt.name}/{layout}")


def test_report_validated_module_count(capsys):
    with capsys.disabled():
        print(f"\ncoopvec target: {len(VALIDATED)} SPIR-V modules passed spirv-val")


def test_module_declares_the_extension_and_the_vulkan_memory_model():
    text = compile(ROOT / "models" / "mlp_32_64x4_16.onnx", target="coopvec", weights="fp16").spvasm()
    for line in ("OpCapability CooperativeVectorNV", "OpCapability VulkanMemoryModel", "OpCapability Float16",
                 'OpExtension "SPV_NV_cooperative_vector"', "OpMemoryModel Logical Vulkan"):
        assert line in text


def test_relu_mlp_runs_on_whole_float16_vectors_converting_only_at_its_edges():
    program = compile(ROOT / "models" / "mlp_32_64x4_16.onnx", target="coopvec", weights="fp16")
    counts = _counts(program, "OpCooperativeVectorLoadNV", "OpCooperativeVectorStoreNV",
                     "OpCooperativeVectorMatrixMulAddNV", "FMax", "OpFConvert", "OpCompositeExtract", "OpLoad")
    assert counts == {"OpCooperativeVectorLoadNV": 1, "OpCooperativeVectorStoreNV": 1,
                      "OpCooperativeVectorMatrixMulAddNV": 5, "FMax": 4, "OpFConvert": 2, "OpCompositeExtract": 1,
                      "OpLoad": 2}  # the invocation id and the sample count; float32 in and out


def test_odd_sizes_are_padded_and_moved_component_by_component():
    program = compile(ROOT / "models" / "mlp_3_64x2_3.onnx", target="coopvec", weights="fp16")
    entries = program.binary.weight_image.entries
    shapes = [entries[i.args[0]].shape for i in program.kernel.body if i.op == "gemv"]
    assert shapes == [(64, 8), (64, 64), (8, 64)]
    counts = _counts(program, "OpCooperativeVectorLoadNV", "OpCooperativeVectorStoreNV", "OpStore")
    assert counts == {"OpCooperativeVectorLoadNV": 0, "OpCooperativeVectorStoreNV": 0, "OpStore": 3}


@pytest.mark.parametrize("layout, enumerant, strided", [("row_major", 0, True), ("column_major", 1, True),
                                                        ("inferencing_optimal", 2, False)])
def test_layout_and_stride_operands_follow_the_manifest(layout, enumerant, strided):
    kernel = compile(ROOT / "models" / "mlp_32_64x4_16.onnx", target="coopvec", weights="fp16").kernel
    packed = _packed(kernel, layout)
    text = disassemble(target("coopvec").compile(kernel, FP16, 64, packed=packed).spirv)
    gemvs = [line.split("=", 1)[1].split() for line in text.splitlines() if "OpCooperativeVectorMatrixMulAddNV" in line]
    # opname, result type and 12 operands, then the stride for plain layouts
    assert {len(words) for words in gemvs} == {14 + strided}
    assert all(words[12:14] == [f"%uint_{enumerant}", "%false"] for words in gemvs)
    assert all(e.layout == (layout if len(e.shape) == 2 else "vector") for e in packed.entries.values())


def test_requirements_name_the_formats_combination_and_the_longest_vector():
    kernel = compile(ROOT / "models" / "mlp_64_128x4_16.onnx").kernel
    needs = requirements(kernel)
    assert needs.combinations == {("FLOAT16",) * 5} and needs.components == 128
    assert requirements(kernel, weight_format("fp8_e4m3")).combinations == {
        ("FLOAT16", "FLOAT8_E4M3", "FLOAT8_E4M3", "FLOAT16", "FLOAT16")}
    assert combination(weight_format("fp8_e5m2")) == ("FLOAT16", "FLOAT8_E5M2", "FLOAT8_E5M2", "FLOAT16", "FLOAT16")
    assert combination(weight_format("int8")) == ("FLOAT32", "SINT8", "SINT8", "SINT32", "SINT32")
    # 8-bit matrices are padded to 16 elements a side, so a 3-wide input takes a 16-component vector
    small = compile(ROOT / "models" / "mlp_3_64x2_3.onnx").kernel
    assert requirements(small, weight_format("fp8_e4m3")).components == 64
    assert requirements(compile_graph(encoding()).kernel).combinations == frozenset()
    assert requirements(compile(ROOT / "models" / "mlp_3_64x2_3.onnx").kernel).components == 64


def test_float32_weights_are_refused_naming_the_formats_it_takes():
    with pytest.raises(CompileError, match="coopvec target stores weights as fp16 or fp8_e4m3 or fp8_e5m2 or int8, "
                                           "not 'fp32'"):
        compile_graph(tiny_mlp(), target_name="coopvec", weights="fp32")


@pytest.mark.parametrize("name, make", [("tiny_mlp", tiny_mlp), ("encoding", encoding)])
def test_golden_dumps(name, make, tmp_path):
    program = compile_graph(make(), target_name="coopvec", weights="fp16")
    spirv_val(program.spirv, tmp_path)
    text = program.spvasm()
    golden = GOLDEN / f"coopvec_{name}.txt"
    if not golden.exists():
        golden.write_text(text)
        pytest.fail(f"wrote the missing golden file {golden}: review it and commit it")
    assert text == golden.read_text(), f"if the change is intended, delete {golden}, rerun, review and commit"


@pytest.mark.parametrize("weights", ["fp16", "fp8_e4m3"])
@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_float16_io_modules_pass_spirv_val(path, weights, tmp_path):
    """The kernels float16 device arrays run: inputs and outputs bound as float16 rows, every zoo model, float16 and
    8-bit float weights."""
    program = compile(path, target="coopvec", weights=weights)
    binary = target("coopvec").compile(program.kernel, weight_format(weights), 64, io_dtype="f16")
    assert [b.dtype for b in binary.bindings[1:]] == ["f16"] * (len(binary.bindings) - 1)
    spirv_val(binary.spirv, tmp_path)


def test_float16_io_reads_and_writes_halves_without_converting():
    program = compile(ROOT / "models" / "mlp_32_64x4_16.onnx", target="coopvec", weights="fp16")
    half = target("coopvec").compile(program.kernel, FP16, 64, io_dtype="f16")
    text = disassemble(half.spirv)
    assert "OpFConvert" not in text and text.count("OpCooperativeVectorStoreNV") == 1
    assert text.count("OpCooperativeVectorLoadNV") == 1


def test_float16_io_is_for_inference_with_float_weights():
    path = ROOT / "models" / "mlp_32_64x4_16.onnx"
    program = compile(path, target="coopvec", weights="fp16")
    with pytest.raises(CompileError, match="float16 rows for inference with float weights only"):
        target("coopvec").compile(program.kernel, FP16, 64, io_dtype="bf16")
    with coopnn.load(path, backend="numpy") as model:
        calibration = random_feeds(model, 64, seed=2)
    int8 = compile(path, target="coopvec", weights="int8", calibration=calibration)
    fmt = calibrated(weight_format("int8"), int8.graph, calibration)
    with pytest.raises(CompileError, match="with int8 weights"):
        target("coopvec").compile(int8.kernel, fmt, 64, io_dtype="f16")


@pytest.mark.parametrize("io_dtype", ["f32", "f16"])
@pytest.mark.parametrize("size", [32, 128, 256])
def test_the_workgroup_sizes_the_inference_probe_compares_pass_spirv_val(size, io_dtype, tmp_path):
    """`coopnn.bench.inference_variants` compiles these against the model's own weight manifest."""
    program = compile(ROOT / "models" / "mlp_64_128x4_16.onnx", target="coopvec", weights="fp16")
    packed = _packed(program.kernel, "inferencing_optimal")
    binary = target("coopvec").compile(program.kernel, FP16, size, packed=packed, io_dtype=io_dtype)
    assert binary.workgroup_size == (size, 1, 1)
    spirv_val(binary.spirv, tmp_path)
