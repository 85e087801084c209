"""Structured control flow: selection and loop headers, merge blocks, phis, block order."""

from __future__ import annotations

import pytest

from coopnn.shaders.spirv import Module, SpirvBuildError


def block_opnames(function) -> list[list[str]]:
    return [[i.opname for i in block.instructions] for block in function.blocks]


@pytest.fixture
def parts():
    m = Module()
    u32, boolean = m.type_int(32, False), m.type_bool()
    main = m.function(m.type_void(), name="main")
    return m, main, u32, boolean


def test_if_without_else_branches_to_the_merge_block(parts):
    m, main, u32, boolean = parts
    condition = m.constant(boolean, True)
    with main.if_(condition):
        main.emit("OpNop")
    main.return_()
    assert block_opnames(main) == [["OpSelectionMerge", "OpBranchConditional"], ["OpNop", "OpBranch"], ["OpReturn"]]
    header, then, merge = main.blocks
    branch = header.instructions[1]
    assert branch.operands == (condition, then.label, merge.label)
    assert header.instructions[0].operands[0] is merge.label


def test_if_else_and_an_arm_that_returns(parts):
    m, main, u32, boolean = parts
    with main.if_(m.constant(boolean, False)) as branch:
        main.return_()
        branch.else_()
        main.emit("OpNop")
    main.return_()
    header, then, otherwise, merge = main.blocks
    assert header.instructions[1].operands[1:] == (then.label, otherwise.label)
    assert block_opnames(main)[1:] == [["OpReturn"], ["OpNop", "OpBranch"], ["OpReturn"]]


def test_a_second_else_is_an_error(parts):
    m, main, u32, boolean = parts
    with pytest.raises(SpirvBuildError, match="already has an else-arm"):
        with main.if_(m.constant(boolean, False)) as branch:
            branch.else_()
            branch.else_()


def test_for_range_makes_header_condition_body_continue_and_merge(parts):
    m, main, u32, boolean = parts
    zero, ten = m.constant(u32, 0), m.constant(u32, 10)
    with main.for_range(zero, ten) as i:
        main.emit("OpNop")
    main.return_()
    assert block_opnames(main) == [
        ["OpBranch"],                                  # preheader
        ["OpPhi", "OpLoopMerge", "OpBranch"],          # header
        ["OpULessThan", "OpBranchConditional"],        # condition
        ["OpNop", "OpBranch"],                         # body
        ["OpIAdd", "OpBranch"],                        # continue target, back edge
        ["OpReturn"],                                  # merge
    ]
    preheader, header, condition, body, continue_target, merge = main.blocks
    phi = header.instructions[0]
    assert phi.result is i and phi.operands[2:4] == (zero, preheader.label)
    assert phi.operands[4:] == (continue_target.instructions[0].result, continue_target.label)
    assert header.instructions[1].operands[:2] == (merge.label, continue_target.label)


def test_for_range_on_signed_counters_compares_signed(parts):
    m, main, u32, boolean = parts
    i32 = m.type_int(32, True)
    with main.for_range(m.constant(i32, -4), m.constant(i32, 4)):
        pass
    main.return_()
    assert block_opnames(main)[2][0] == "OpSLessThan"


def test_loop_phi_without_next_value_is_an_error(parts):
    m, main, u32, boolean = parts
    with pytest.raises(SpirvBuildError, match="has no next value"):
        with main.loop() as loop:
            loop.phi(u32, m.constant(u32, 0))
            loop.while_(m.constant(boolean, True))


def test_nested_selection_inside_a_loop_keeps_blocks_in_dominance_order(parts):
    m, main, u32, boolean = parts
    with main.for_range(m.constant(u32, 0), m.constant(u32, 3)) as i:
        with main.if_(main.emit("OpIEqual", boolean, i, m.constant(u32, 1))):
            main.emit("OpNop")
    main.return_()
    assert block_opnames(main) == [
        ["OpBranch"],
        ["OpPhi", "OpLoopMerge", "OpBranch"],
        ["OpULessThan", "OpBranchConditional"],
        ["OpIEqual", "OpSelectionMerge", "OpBranchConditional"],  # loop body, selection header
        ["OpNop", "OpBranch"],                                    # then-arm
        ["OpBranch"],                                             # selection merge, on to the continue target
        ["OpIAdd", "OpBranch"],
        ["OpReturn"],
    ]
