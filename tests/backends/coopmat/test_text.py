"""The coopmat kernel's text form, compiled for a made-up H100 (no GPU needed): the work-group's tile, its two
activation buffers of padded rows, the guarded input and output copies and, per layer, the column tiles over the
subgroups, the B tiles loaded once per column, the row tiles' accumulators from the bias tile, the epilogue, the
float16 store into the other buffer and the barrier; with the sizes of the model, as many products as the SPIR-V."""

from __future__ import annotations

import re

import numpy as np

from coopnn.backends.coopmat.backend import CoopmatBackend
from coopnn.backends.coopmat.target import CoopmatTarget, Shape
from coopnn.graph.builder import GraphBuilder
from coopnn.graph.ir import Op
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.spirv import disassemble
from tests.backends.tile_devices import h100
from tests.shaders.targets.test_tile_plan import zoo_program

BACKEND = CoopmatBackend()


def _binary(stem: str):
    info, program = h100(), zoo_program(stem)
    return BACKEND.compile_for(info, program, FP16, BACKEND.pack_for(info, program, FP16))


def _layers(text: str) -> list[str]:
    """The text of each layer, from its comment to its barrier."""
    return re.findall(r"; layer \d+:.*?barrier\.local", text, re.S)


def _contains(text: str, lines: list[str]) -> None:
    """Each of `lines` is a line of `text` (indentation aside), in this order."""
    stripped = [line.strip() for line in text.splitlines()]
    at = 0
    for line in lines:
        assert line in stripped[at:], line
        at = stripped.index(line, at) + 1


def test_the_tile_buffers_and_copies_of_mlp_3_64x2_3():
    text = _binary("mlp_3_64x2_3").text
    assert text.startswith("; kernel mlp_3_64x2_3 on the coopmat target (VK_KHR_cooperative_matrix): a work-group of "
                           "256 work-items\n; (64 x 4) carries a tile of 64 samples")
    assert "M x N x K =\n; 16 x 16 x 16, feature dimensions padded to multiples of 16" in text
    _contains(text, [
        "%w0: memref<f16x16x64>,  ; byte 0: matrix 64 x 3 (padded to 64 x 16), row-major",
        "%b1: memref<f16x64x16>,  ; byte 2048: biases 64 as a tile of 16 identical rows",
        "%b5: memref<f16x16x16>,  ; byte 16384: biases 3 (padded to 16) as a tile of 16 identical rows",
        "%n: index) {work_group_size=[64,4]} {",
        "foreach_tile (%i) = (%c0), (%n) as (%ti) <= (64) {",
        "%subgroup = cast %sg : index",
        "; workgroup memory: two buffers of 64 rows (samples) of 72 halves, the widest layer's 64 and 8 of padding",
        "%act0 = alloca : memref<f16x64x64,strided<1,72>,local>",
        "%act1 = alloca : memref<f16x64x64,strided<1,72>,local>",
        # the coalesced, guarded input copy: 64 samples x 3 features, then the padding columns 3..15
        "foreach (%e) = (0), (192) {",
        "%inside = cmp.lt %s, %ti : bool",
        "%0 = load %in0[%f, %sample] : f32",
        "%rounded = cast %0 : f16",
        "store %y, %act0[%f, %s]",
        "; padding: columns 3 to 15 of every row of %act0 are 0, element e by work-item e mod 256",
        "foreach (%e) = (0), (832) {",
        "store %zero, %act0[%f, %s]",
        "barrier.local",
        # three layers, %act0 -> %act1 -> %act0 -> %act1, then the guarded output copy from %act1
        "; output: the tile's 64 x 3 floats of %act1 into %out7, element e by work-item e mod 256,",
        "foreach (%e) = (0), (192) {",
        "if %inside {",
        "%h = load %act1[%f, %s] : f16",
        "%6 = cast %h : f32",
        "store %6, %out7[%f, %sample]",
    ])
    assert len(_layers(text)) == 3


def test_the_layers_of_mlp_3_64x2_3():
    first, second, last = _layers(_binary("mlp_3_64x2_3").text)
    _contains(first, [
        "; layer 1: %1 = gemv.n %w0, %0, %b1 from %act0 into %act1, weights 64 x 3 (padded to 64 x 16):",
        "; 4 column tiles of 16, tile c on subgroup c mod %subgroups; a column loads its 1 B tile once",
        "for %col1 = %subgroup, 4, %subgroups {",
        "%j1 = mul %col1, 16 : index",
        "%bias1 = cooperative_matrix_load.t %b1[%j1, 0] : coopmatrix<f16x16x16,matrix_acc>",
        "%C1 = cast %bias1 : coopmatrix<f32x16x16,matrix_acc>",
        "%B1_0 = cooperative_matrix_load %w0[0, %j1] : coopmatrix<f16x16x16,matrix_b>",
        "for %row1 = 0, 64, 16 {",
        "%A1_0 = cooperative_matrix_load.t %act0[0, %row1] : coopmatrix<f16x16x16,matrix_a>",
        "%1 = cooperative_matrix_mul_add %A1_0, %B1_0, %C1 : coopmatrix<f32x16x16,matrix_acc>",
        "%3 = cooperative_matrix_apply (%r,%c,%v)=%1 -> coopmatrix<f32x16x16,matrix_acc> {",
        "%h = cast %v : f16",
        "%x = cast %h : f32",
        "%2 = constant 0.0 : f32",
        "%3 = max %x, %2 : f32",
        "yield (%3)",
        "%H1 = cast %3 : coopmatrix<f16x16x16,matrix_acc>",
        "cooperative_matrix_store.t %H1, %act1[%j1, %row1]",
        "} attributes {unroll=true}",
        "barrier.local",
    ])
    # 64 inputs: four K steps, ascending, each B tile loaded once per column before the row tiles
    _contains(second, [
        "for %col2 = %subgroup, 4, %subgroups {",
        *(f"%B2_{k} = cooperative_matrix_load %w2[{16 * k}, %j2] : coopmatrix<f16x16x16,matrix_b>" for k in range(4)),
        "for %row2 = 0, 64, 16 {",
        "%P2_0 = cooperative_matrix_mul_add %A2_0, %B2_0, %C2 : coopmatrix<f32x16x16,matrix_acc>",
        "%P2_1 = cooperative_matrix_mul_add %A2_1, %B2_1, %P2_0 : coopmatrix<f32x16x16,matrix_acc>",
        "%P2_2 = cooperative_matrix_mul_add %A2_2, %B2_2, %P2_1 : coopmatrix<f32x16x16,matrix_acc>",
        "%A2_3 = cooperative_matrix_load.t %act1[48, %row2] : coopmatrix<f16x16x16,matrix_a>",
        "%4 = cooperative_matrix_mul_add %A2_3, %B2_3, %P2_2 : coopmatrix<f32x16x16,matrix_acc>",
        "cooperative_matrix_store.t %H2, %act0[%j2, %row2]",
    ])
    # three outputs: one column tile; no epilogue, so the product is stored as it is
    _contains(last, [
        "; layer 3: %6 = gemv.n %w4, %5, %b5 from %act0 into %act1, weights 3 x 64 (padded to 16 x 64):",
        "for %col3 = %subgroup, 1, %subgroups {",
        "%6 = cooperative_matrix_mul_add %A3_3, %B3_3, %P3_2 : coopmatrix<f32x16x16,matrix_acc>",
        "%H3 = cast %6 : coopmatrix<f16x16x16,matrix_acc>",
    ])
    assert "cooperative_matrix_apply" not in last


def test_the_sizes_of_mlp_64_128x4_16():
    binary = _binary("mlp_64_128x4_16")
    text = binary.text
    _contains(text, [
        "%w2: memref<f16x128x128>,  ; byte 20480: matrix 128 x 128, row-major",
        "%w8: memref<f16x128x16>,  ; byte 131072: matrix 16 x 128, row-major",
        "; workgroup memory: two buffers of 64 rows (samples) of 136 halves, the widest layer's 128 and 8 of padding",
        "; (consecutive rows start on different banks), 17408 bytes each",
        "%act0 = alloca : memref<f16x128x64,strided<1,136>,local>",
        "foreach (%e) = (0), (4096) {",
        "%f = rem %e, 64 : index",
        "; output: the tile's 64 x 16 floats of %act1 into %out11, element e by work-item e mod 256,",
        "foreach (%e) = (0), (1024) {",
    ])
    assert "; padding" not in text  # 64 input features: whole K steps
    layers = _layers(text)
    # (column tiles, K steps) per layer: 64 -> 128 -> 128 -> 128 -> 128 -> 16
    sizes = [(8, 4), (8, 8), (8, 8), (8, 8), (1, 8)]
    assert len(layers) == len(sizes)
    for index, (layer, (tiles, steps)) in enumerate(zip(layers, sizes), start=1):
        source, target = (index - 1) % 2, index % 2
        assert f"from %act{source} into %act{target}" in layer
        assert f"for %col{index} = %subgroup, {tiles}, %subgroups {{" in layer
        assert layer.count("= cooperative_matrix_load %w") == steps
        assert layer.count(f"= cooperative_matrix_load.t %act{source}[") == steps
        assert layer.count("cooperative_matrix_mul_add") == steps
        assert f"cooperative_matrix_store.t %H{index}, %act{target}[%j{index}, %row{index}]" in layer
        # the hidden layers' ReLU on the components of each accumulator (%3, %5, %7, %9); none on the output layer
        assert (f"%{2 * index + 1} = max %x, %2 : f32" in layer) == (index < len(sizes))
    # the text's products, each run by the 4 row tiles, are the SPIR-V's
    spirv = disassemble([int.from_bytes(binary.spirv[i:i + 4], "little") for i in range(0, len(binary.spirv), 4)])
    assert spirv.count("OpCooperativeMatrixMulAddKHR") == 4 * text.count("cooperative_matrix_mul_add")


def test_other_shapes_tiles_and_a_stage_zero_epilogue():
    b = GraphBuilder("scaled_input")
    x = b.input("x", 5)
    h = b.node(Op.LINEAR, "fc", [b.node(Op.TANH, "tanh", [x]), b.constant("w", np.ones((40, 5))),
                                 b.constant("b", np.zeros(40))])
    y = b.node(Op.LINEAR, "out", [h, b.constant("w2", np.ones((3, 40)))], output="y")
    text = CoopmatTarget().compile(lower(b.graph([y])), FP16, 32, shape=Shape(16, 8, 16)).text
    _contains(text, [
        "; (32 x 8) carries a tile of 32 samples through every layer as subgroup-scope cooperative matrices of M x N x "
        "K =",
        "%act0 = alloca : memref<f16x48x32,strided<1,56>,local>",
        "%0 = load %in0[%f, %sample] : f32",
        "%h = cast %0 : f16",
        "%x = cast %h : f32",
        "%1 = tanh %x : f32",
        "%rounded = cast %1 : f16",
        "; padding: columns 5 to 15 of every row of %act0 are 0, element e by work-item e mod 256",
        "for %col1 = %subgroup, 6, %subgroups {",
        "%B1_0 = cooperative_matrix_load %w0[0, %j1] : coopmatrix<f16x16x8,matrix_b>",
        "for %row1 = 0, 32, 16 {",
        "%2 = cooperative_matrix_mul_add %A1_0, %B1_0, %C1 : coopmatrix<f32x16x8,matrix_acc>",
        "for %col2 = %subgroup, 2, %subgroups {",  # 3 outputs padded to 16: two tiles of 8
        "%C2 = constant 0.0 : coopmatrix<f32x16x8,matrix_acc>",  # no bias: the accumulators start at 0
        "%B2_2 = cooperative_matrix_load %w2[32, %j2] : coopmatrix<f16x16x8,matrix_b>",
    ])
