"""coopmat2 with block-format weights (q8_0, q4_0), without a GPU: the decoded weights are float16(d * (q - zero)),
which is not d * (q - zero) itself (the decode rounds), shown weight by weight through one-hot inputs in the kernel
model; the DecodeVectorFunc variant (its numpy meaning run through the kernel model, its binary checked word by word
as spirv-val cannot take it); what the device must offer for the block formats and when the DecodeVectorFunc is
emitted; and the weights the block formats cannot decode to float16."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.backends.coopmat2 import decode
from coopnn.backends.coopmat2.backend import Coopmat2Backend
from coopnn.backends.coopmat2.steps import BLOCK, Load, tile_kernel
from coopnn.backends.coopmat2.target import GRANULARITY, TILE, pack_program
from coopnn.compiler import compile, compile_graph
from coopnn.errors import CompileError
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.fp16 import round_fp16
from coopnn.layouts.tensor_memory import load
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.spirv import disassemble, grammar
from coopnn.shaders.spirv.literals import string_from_words
from coopnn.shaders.targets.tile_plan import plan_tiles
from tests.backends.coopmat2 import kernel_model
from tests.backends.coopmat2.kernel_model import run_steps
from tests.backends.coopmat2.test_target import check_steps_at_ragged_batches
from tests.backends.portable.test_backend import _one_linear
from tests.backends.tile_devices import FEATURES, h100
from tests.backends.tile_reference import run_tile_emulation
from tests.conftest import ROOT
from tests.shaders.spirv.test_cooperative_matrix2 import instructions, result_position
from tests.shaders.targets.test_tile_plan import ACCEPTED

BLOCK_FORMATS = ("q8_0", "q4_0")
BACKEND = Coopmat2Backend()


def block_weights() -> np.ndarray:
    """8 x 290 weights (10 blocks a row, the last padded): scales from float16-subnormal to large, every code of
    both formats in rows 6 and 7, a zero block."""
    rng = np.random.default_rng(7)
    scales = np.array([1e-6, 2.0 ** -20, 1e-3, 1.0, 100.0, 5e3, 1.0, 1.0], np.float32)
    w = (rng.normal(size=(8, 290)) * scales[:, None]).astype(np.float32)
    q8_codes = np.concatenate([np.arange(-127, 128), np.zeros(9 * 31 - 255)]).reshape(9, 31)
    w[6, :288] = (np.concatenate([np.full((9, 1), 127), q8_codes], axis=1) / 100).reshape(-1)
    w[7, :288] = np.tile(np.arange(-8, 8), 18)
    w[7, 32:64] = 0
    return w


def one_hot_outputs(weights: str, decode_vector: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The kernel model's outputs for the one-hot inputs of `block_weights` (W e_c: column c of W exactly, the
    product of a float16 weight and 1 summed with zeros), and the weights as the format stores them (float32)."""
    fmt = weight_format(weights)
    w = block_weights()
    graph = _one_linear(w)
    program = lower(graph)
    kernel = tile_kernel(plan_tiles(program, "coopmat2"), TILE, GRANULARITY, fmt, decode_vector)
    return run_steps(kernel, pack_program(program, fmt), np.eye(290, dtype=np.float32)), fmt.emulate(w)


@pytest.mark.parametrize("weights", BLOCK_FORMATS)
def test_each_decoded_weight_is_the_stored_value_rounded_to_float16(weights):
    got, stored = one_hot_outputs(weights)
    np.testing.assert_array_equal(got, round_fp16(stored).T)
    inexact = round_fp16(stored) != stored  # d * (q - zero) needs more than float16's 11 bits
    assert inexact.sum() > 100, "the test would not show the rounding"
    graph = _one_linear(block_weights())
    np.testing.assert_array_equal(run_tile_emulation(graph, {"x": np.eye(290, dtype=np.float32)},
                                                     weight_format(weights))["y"], got)


@pytest.mark.parametrize("weights", BLOCK_FORMATS)
def test_the_decode_vector_function_decodes_the_same_weights(weights, monkeypatch):
    width = decode.vector_width(weight_format(weights))
    assert width == {"q8_0": 4, "q4_0": 8}[weights]
    calls = []
    vector_decode = kernel_model.decode_weight_vectors

    def counted(fmt, w):
        function = vector_decode(fmt, w)
        return lambda *args: calls.append(args[1].size) or function(*args)

    monkeypatch.setattr(kernel_model, "decode_weight_vectors", counted)
    got, stored = one_hot_outputs(weights, width)
    np.testing.assert_array_equal(got, round_fp16(stored).T)
    assert sum(calls) > 0, "no group was decoded by the DecodeVectorFunc"


def test_a_group_of_the_vector_function_is_one_run_of_codes():
    """Codes j .. j + V - 1 of a DecodeVectorFunc group (j a multiple of V) lie in one run: q4_0's groups from 0 and
    8 read low nibbles of bytes 0-15, from 16 and 24 high nibbles of the same bytes (GGML's order)."""
    fmt = weight_format("q4_0")
    weights = np.tile(np.arange(-8, 8, dtype=np.float32), 2)[None, :]  # scale 1: code j + 8 for weight j
    stored = fmt.encode(weights)
    np.testing.assert_array_equal(stored["qs"][0, 0], np.arange(16) | np.arange(16) << 4)
    rows = kernel_model.decode_weight_vectors(fmt, 8)(stored.reshape(-1), np.zeros(4, np.int64),
                                                       np.zeros((2, 4), np.int64), np.array([[0] * 4, [0, 8, 16, 24]]))
    np.testing.assert_array_equal(rows.reshape(-1), weights[0])
    assert decode.code_bytes(fmt) == 16 and decode.code_bytes(weight_format("q8_0")) == 32


@pytest.mark.parametrize("weights", BLOCK_FORMATS)
@pytest.mark.parametrize("stem", ["mlp_3_64x2_3", "gelu_silu_mlp"])
def test_the_decode_vector_kernel_in_numpy_gives_the_tile_emulation(stem, weights):
    fmt = weight_format(weights)
    check_steps_at_ragged_batches(stem, fmt, decode.vector_width(fmt))


def _structure(words: list[int]):
    listed = list(instructions(words))
    names = {string_from_words(operands[1:])[0]: operands[0] for opname, operands in listed if opname == "OpName"}
    by_result = {operands[result_position(opname)]: (opname, operands) for opname, operands in listed
                 if grammar().instruction(opname).has_result}
    return listed, names, by_result


@pytest.mark.parametrize("weights", BLOCK_FORMATS)
@pytest.mark.parametrize("stem", ACCEPTED)
def test_every_decode_vector_module_names_both_functions_on_each_weight_load(stem, weights):
    """SPIRV-Tools 2025.5 refuses capability 5447 (SPV_NV_cooperative_matrix_decode_vector), so the module is
    checked word by word: the capability and extension, each weight load's mask TensorView|DecodeFunc|
    DecodeVectorFunc followed by the view and both functions, and a vector function of V float16 taking the scalar
    one's parameters. Without the option the same model's module passes spirv-val (test_target.py)."""
    fmt = weight_format(weights)
    width = decode.vector_width(fmt)
    program = compile(ROOT / "models" / f"{stem}.onnx", target="coopmat2", weights=weights, decode_vector=True)
    assert decode.DECODE_VECTOR_FEATURE in program.binary.features
    words = [int.from_bytes(program.spirv[i:i + 4], "little") for i in range(0, len(program.spirv), 4)]
    listed, names, by_result = _structure(words)
    capabilities = [operands[0] for opname, operands in listed if opname == "OpCapability"]
    assert grammar().enumerant("Capability", "CooperativeMatrixDecodeVectorNV").value in capabilities
    extensions = [string_from_words(operands)[0] for opname, operands in listed if opname == "OpExtension"]
    assert "SPV_NV_cooperative_matrix_decode_vector" in extensions
    bits = {name: grammar().enumerant("TensorAddressingOperands", name).value
            for name in ("TensorView", "DecodeFunc", "DecodeVectorFunc")}
    scalar, vector = names[f"decode_{weights}"], names[f"decode_{weights}_x{width}"]
    decoded = [o for n, o in listed if n == "OpCooperativeMatrixLoadTensorNV" and o[6] & bits["DecodeFunc"]]
    kernel = tile_kernel(plan_tiles(program.kernel, "coopmat2"), TILE, GRANULARITY, fmt, width)
    weight_loads = [s for s in kernel.steps if isinstance(s, Load) and s.decode is not None]
    assert len(decoded) == len(weight_loads) >= len(program.kernel.params_of("matrix"))
    for load_operands in decoded:
        assert load_operands[6] == sum(bits.values())
        assert by_result[load_operands[7]][0] == "OpCreateTensorViewNV" and load_operands[8:] == [scalar, vector]
    functions = {operands[1]: operands[3] for opname, operands in listed if opname == "OpFunction"}
    types = {o[0]: o for n, o in listed if n == "OpTypeFunction"}
    scalar_type, vector_type = types[functions[scalar]], types[functions[vector]]
    assert vector_type[2:] == scalar_type[2:]
    returned = by_result[vector_type[1]]
    assert returned[0] == "OpTypeVector" and returned[1][1:] == [scalar_type[1], width]
    assert f"decode(@decode_{weights}, @decode_{weights}_x{width})" in program.text
    assert "TensorView|DecodeFunc|DecodeVectorFunc %" in disassemble(words)


def test_decode_vector_is_for_the_block_formats_of_the_coopmat2_target():
    graph = _one_linear(block_weights())
    with pytest.raises(CompileError, match="a DecodeVectorFunc decodes block formats .* weights='fp16'"):
        compile_graph(graph, target_name="coopmat2", weights="fp16", decode_vector=True)
    with pytest.raises(CompileError, match="the portable target has no DecodeVectorFunc variant"):
        compile_graph(graph, target_name="portable", weights="q8_0", decode_vector=True)


@pytest.mark.parametrize("feature", sorted(decode.FEATURES))
def test_the_block_formats_need_block_loads_device_addresses_and_16_bit_integers(feature):
    info = h100(features=tuple(f for f in FEATURES if f != feature))
    for weights in BLOCK_FORMATS:
        assert BACKEND.format_needs(info, weight_format(weights)) == f"H100 lacks the features {feature}"
    assert BACKEND.format_needs(info, weight_format("fp16")) is None


def test_the_decode_vector_function_is_emitted_where_the_device_offers_it():
    program = lower(_one_linear(block_weights()))
    for weights in BLOCK_FORMATS:
        fmt = weight_format(weights)
        for features, emitted in ((FEATURES, False), (FEATURES + (decode.DECODE_VECTOR_FEATURE,), True)):
            info = h100(features=features)
            binary = BACKEND.compile_for(info, program, fmt, BACKEND.pack_for(info, program, fmt))
            assert (decode.DECODE_VECTOR_FEATURE in binary.features) == emitted
            assert (f"_x{decode.vector_width(fmt)})" in binary.text) == emitted
    info = h100(features=FEATURES + (decode.DECODE_VECTOR_FEATURE,))
    fp16 = weight_format("fp16")
    assert "decode" not in BACKEND.compile_for(info, program, fp16, BACKEND.pack_for(info, program, fp16)).text


def test_weights_that_decode_beyond_float16_are_refused():
    w = block_weights()
    w[5] *= 20  # a block's largest weight 1e5: q8_0 and q4_0 hold it, float16 does not
    for weights in BLOCK_FORMATS:
        with pytest.raises(CompileError, match="matrix 'w' decodes to a weight of magnitude .* beyond float16"):
            compile_graph(_one_linear(w), target_name="coopmat2", weights=weights)


def test_the_kernel_reads_blocks_through_layouts_counting_blocks():
    """The weight layout of a block format: block size (1, 32), strides in blocks (a row of 290 weights is 10
    blocks), each element's blockCoord (row, column div 32) and coordInBlock (0, column mod 32)."""
    fmt = weight_format("q4_0")
    program = lower(_one_linear(block_weights()))
    kernel = tile_kernel(plan_tiles(program, "coopmat2"), TILE, GRANULARITY, fmt)
    steps = [s for s in kernel.steps if getattr(s, "decode", None)]
    assert [s.layout.offset for s in steps] == [(0, k) for k in range(0, 290, BLOCK)]  # the input's blocks
    memory = kernel_model.weight_memory(pack_program(program, fmt))["w0"]
    seen = []

    def record(memory, index, block_coord, coord_in_block):
        seen.append((index, block_coord, coord_in_block))
        return np.zeros(index.size, np.float16)

    for step in steps:
        layout = step.layout.numpy({})
        assert layout.block_size == (1, 32) and layout.stride == (10, 1) and step.decode == "q4_0"
        load(memory, layout, step.type.rows, step.type.cols, view=step.view.numpy(), dtype=np.float16, decode=record)
    index, block_coord, coord_in_block = (np.concatenate(part, axis=-1) for part in zip(*seen))
    np.testing.assert_array_equal(index, block_coord[0] * 10 + block_coord[1])
    assert sorted(set(zip(*block_coord))) == [(r, b) for r in range(8) for b in range(10)]
    assert set(coord_in_block[0]) == {0} and set(coord_in_block[1]) == set(range(32))
