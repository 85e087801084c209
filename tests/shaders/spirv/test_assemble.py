"""Assembly: header, section order of the SPIR-V logical layout, ids numbered last, entry point interfaces."""

from __future__ import annotations

import pytest

from coopnn.shaders.spirv import Id, Module, SpirvBuildError, disassemble, grammar
from tests.shaders.spirv.sample_modules import exp_sum_shader

# Logical layout sections (SPIR-V spec 2.4), by the opnames each may hold.
SECTION_OF = {
    "OpCapability": 0, "OpExtension": 1, "OpExtInstImport": 2, "OpMemoryModel": 3, "OpEntryPoint": 4,
    "OpExecutionMode": 5, "OpExecutionModeId": 5, "OpName": 6, "OpMemberName": 6, "OpDecorate": 7,
    "OpMemberDecorate": 7, "OpDecorateId": 7, "OpDecorateString": 7,
}
GLOBALS, FUNCTIONS = 8, 9


def opnames(words: list[int]) -> list[str]:
    found, position = [], 5
    while position < len(words):
        found.append(grammar().instruction_by_opcode(words[position] & 0xFFFF).opname)
        position += words[position] >> 16
    return found


def result_ids(words: list[int]) -> list[int]:
    ids, position = [], 5
    while position < len(words):
        spec = grammar().instruction_by_opcode(words[position] & 0xFFFF)
        kinds = [o.kind for o in spec.operands]
        if "IdResult" in kinds:
            ids.append(words[position + 1 + kinds.index("IdResult")])
        position += words[position] >> 16
    return ids


def test_header_carries_magic_version_bound_and_schema():
    words = exp_sum_shader(version=(1, 5)).to_words()
    assert words[0] == 0x07230203
    assert words[1] == 0x00010500
    assert words[3] == max(result_ids(words)) + 1
    assert words[4] == 0
    assert exp_sum_shader().to_words()[1] == 0x00010600


def test_sections_come_in_the_order_the_specification_requires():
    sections = []
    in_function = False
    for opname in opnames(exp_sum_shader().to_words()):
        in_function = in_function or opname == "OpFunction"
        sections.append(FUNCTIONS if in_function else SECTION_OF.get(opname, GLOBALS))
    assert sections == sorted(sections)
    assert set(sections) == set(range(10)) - {1}  # no OpExtension needed at SPIR-V 1.6


def test_ids_are_dense_and_numbered_by_first_appearance():
    words = exp_sum_shader().to_words()
    ids = result_ids(words)
    assert sorted(ids) == list(range(1, words[3]))
    assert ids[0] == 1  # the GLSL.std.450 import is the first id to appear


def test_building_twice_gives_the_same_binary():
    assert exp_sum_shader().to_bytes() == exp_sum_shader().to_bytes()


def test_interface_lists_every_global_used_from_spir_v_1_4_and_only_inputs_outputs_before():
    def entry_point_line(version):
        return next(line.strip() for line in disassemble(exp_sum_shader(version=version).to_words()).splitlines()
                    if "OpEntryPoint" in line)

    assert entry_point_line((1, 6)) == 'OpEntryPoint GLCompute %main "main" %src %dst %push %GlobalInvocationId'
    assert entry_point_line((1, 3)) == 'OpEntryPoint GLCompute %main "main" %GlobalInvocationId'


def test_interface_follows_function_calls_and_skips_unused_globals():
    m = Module()
    f32 = m.type_float(32)
    used = m.global_variable("Private", f32, name="used")
    m.global_variable("Private", f32, name="unused")
    helper = m.function(m.type_void(), name="helper")
    helper.emit("OpStore", used, m.constant(f32, 1.0))
    helper.return_()
    main = m.function(m.type_void(), name="main")
    main.emit("OpFunctionCall", m.type_void(), helper.id)
    main.return_()
    m.entry_point(main)
    assert 'OpEntryPoint GLCompute %main "main" %used\n' in disassemble(m.to_words())


def test_an_id_used_but_never_defined_is_reported():
    m = Module()
    main = m.function(m.type_void(), name="main")
    main.emit("OpBranch", Id("nowhere"))
    m.entry_point(main)
    with pytest.raises(SpirvBuildError, match=r"ids used but never defined: \[Id\('nowhere'\)\]"):
        m.to_words()


def test_versions_newer_than_the_grammar_are_refused():
    with pytest.raises(SpirvBuildError, match=r"SPIR-V 1.7 is newer than the grammar table \(1.6\)"):
        Module(version=(1, 7))


def test_a_module_needs_an_entry_point():
    with pytest.raises(SpirvBuildError, match="no entry point"):
        Module().to_words()
