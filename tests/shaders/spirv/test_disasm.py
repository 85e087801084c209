"""The text dump: golden files for four modules (two of them cooperative-matrix-2 ones), identical to spirv-dis, and
read back by spirv-as to the same words.

Regenerate the golden files after an intended change with `python -m tests.shaders.spirv.test_disasm`.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from coopnn.shaders.spirv import Module, SpirvBuildError, disassemble
from tests.shaders.spirv.coopmat2_modules import q8_0_decode_shader, tensor_addressing_shader
from tests.shaders.spirv.sample_modules import coopvec_layer_shader, exp_sum_shader

GOLDEN = Path(__file__).parent / "golden"
MODULES = {"exp_sum": exp_sum_shader, "coopvec_layer": coopvec_layer_shader,
           "coopmat2_tensor_addressing": tensor_addressing_shader, "coopmat2_q8_0_decode": q8_0_decode_shader}


def without_generator(text: str) -> str:
    """spirv-dis names the generator's vendor from a registry the grammar does not carry."""
    return "".join(line for line in text.splitlines(True) if not line.startswith("; Generator:"))


def words_of(data: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(data) // 4}I", data))


@pytest.mark.parametrize("name", MODULES)
def test_disassembly_matches_the_golden_file(name):
    expected = (GOLDEN / f"{name}.spvasm").read_text()
    assert disassemble(MODULES[name]().to_words()) == expected


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.parametrize("raw_ids", [False, True])
def test_disassembly_is_what_spirv_dis_prints(spirv_tool, name, raw_ids):
    binary = MODULES[name]().to_bytes()
    options = ["--no-color", *(["--raw-id"] if raw_ids else [])]
    result = spirv_tool("spirv-dis", *options, "-", input=binary)
    assert result.returncode == 0, result.stderr.decode()
    assert without_generator(disassemble(binary, raw_ids=raw_ids)) == without_generator(result.stdout.decode())


@pytest.mark.parametrize("name", MODULES)
def test_raw_id_text_assembles_back_to_the_same_words(spirv_tool, name, tmp_path):
    words = MODULES[name]().to_words()
    (tmp_path / "module.spvasm").write_text(disassemble(words, raw_ids=True))
    result = spirv_tool("spirv-as", "--preserve-numeric-ids", "--target-env", "spv1.6", str(tmp_path / "module.spvasm"),
                        "-o", str(tmp_path / "module.spv"))
    assert result.returncode == 0, result.stderr.decode()
    reassembled = words_of((tmp_path / "module.spv").read_bytes())
    assert reassembled[:2] + reassembled[3:] == words[:2] + words[3:]  # all but the generator word


@pytest.mark.parametrize("name", MODULES)
def test_friendly_text_assembles_back_to_the_same_text(spirv_tool, name, tmp_path):
    text = disassemble(MODULES[name]().to_words())
    (tmp_path / "module.spvasm").write_text(text)
    result = spirv_tool("spirv-as", "--preserve-numeric-ids", "--target-env", "spv1.6", str(tmp_path / "module.spvasm"),
                        "-o", str(tmp_path / "module.spv"))
    assert result.returncode == 0, result.stderr.decode()
    assert without_generator(disassemble((tmp_path / "module.spv").read_bytes())) == without_generator(text)


def test_header_can_be_left_out_and_bytes_or_words_are_accepted():
    module = exp_sum_shader()
    assert disassemble(module.to_bytes()) == disassemble(module.to_words())
    assert disassemble(module.to_words(), header=False).startswith("               OpCapability Shader\n")


def test_spec_constant_op_and_bit_masks_decode():
    m = Module()
    u32 = m.type_int(32, False)
    m.spec_constant_op(u32, "OpIAdd", m.spec_constant(u32, 1, 0), m.constant(u32, 2))
    main = m.function(m.type_void(), name="main", control=("Inline", "Pure"))
    main.return_()
    m.entry_point(main, local_size=(1, 1, 1))
    text = disassemble(m.to_words())
    assert "%5 = OpSpecConstantOp %uint IAdd %2 %uint_2\n" in text
    assert "OpFunction %void Inline|Pure" in text


def test_garbage_is_rejected():
    with pytest.raises(SpirvBuildError, match="not a SPIR-V module"):
        disassemble([1, 2, 3, 4, 5])
    with pytest.raises(SpirvBuildError, match="not whole words"):
        disassemble(b"\x03\x02\x23")


if __name__ == "__main__":
    for golden_name, build in MODULES.items():
        (GOLDEN / f"{golden_name}.spvasm").write_text(disassemble(build().to_words()))
        print(f"wrote {GOLDEN / golden_name}.spvasm")
