"""Every code block of the tensor language reference parses, checks (the one marked illegal is refused) and prints
back to an equal program. A block is wrapped in a function whose arguments are the values it uses without defining;
their types come from the block's own `; %0: type` comment, from FREE_TYPES, or are index."""

from __future__ import annotations

import re

import pytest

from coopnn.tl.checker import check
from coopnn.tl.parser import parse
from coopnn.tl.printer import print_program
from tests.tl.reference_blocks import REFERENCE, code_blocks, reference_available

if not reference_available():
    pytest.skip(f"the tensor language reference is not beside this checkout ({REFERENCE})", allow_module_level=True)

# Slips of the reference's examples (docs/tensor-language.md lists them): line -> (written, meant).
FIXES = {
    1735: ("strided<1,16,?,?,?>", "strided<1,32,?,?,?>"),  # 32 rows cannot have a column stride of 16
    1699: ("memref<f32x128,strided<1,?>>", "memref<f32x128>"),  # two strides for one mode
    1978: ("f32x4x?x7,strided<1,16,672>", "f32x4x?x7,strided<1,16,672>>"),  # the memref type is not closed
    1979: ("f32x4x?x7,strided<1,?,?>", "f32x4x?x7,strided<1,?,?>>"),
}
# Types of values the examples use without defining or typing them.
FREE_TYPES = {"%0": "i32", "%A": "memref<f32x70x64>", "%B": "memref<f32x70x64>"}
# The cooperative_matrix_apply example starts from a placeholder ("%0 = ... ; contains a coopmatrix of type T").
PLACEHOLDER = re.compile(r"^(%\w+) = \.\.\. ; contains a coopmatrix of type (\S+)$", re.M)
VALUE_INSTRUCTIONS = ("expand", "fuse", "subview", "load")
SPMD_MARKERS = ("cooperative_matrix_apply",)

BLOCKS = code_blocks()


def _fixed(block, text: str) -> str:
    for line, (written, meant) in FIXES.items():
        if block.line <= line < block.line + block.text.count("\n") + 1:
            text = text.replace(written, meant)
    return text


def test_every_fix_still_applies():
    for line, (written, _) in FIXES.items():
        block = next(b for b in BLOCKS if b.line <= line < b.line + b.text.count("\n") + 1)
        assert written in block.text + str(block.operand_types), f"the fix for line {line} no longer applies"


def _body(block) -> str:
    text = PLACEHOLDER.sub(lambda m: f"%zero_p = constant 0.0 : f32\n{m.group(1)} = cooperative_matrix_construct "
                                     f"%zero_p : {m.group(2)}", _fixed(block, block.text))
    text = re.sub(r"^\s*(" + "|".join(VALUE_INSTRUCTIONS) + ") ", r"%result = \1 ", text, flags=re.M)
    if any(marker in text for marker in SPMD_MARKERS):
        text = "parallel {\n" + text + "\n}"
    return text


def _function(block, arguments: dict[str, str]) -> str:
    listed = ", ".join(f"{name}: {type_}" for name, type_ in arguments.items())
    return f"func @example({listed}) {{\n{_body(block)}\n}}\n"


def wrapped(block) -> str:
    """The block as a function taking the values it uses but does not define."""
    given = {name: _fixed(block, type_) for name, type_ in block.operand_types}
    arguments: dict[str, str] = {}
    for _ in range(8):
        text = _function(block, arguments)
        free = [d.message.split("%")[1] for d in check(parse(text)) if d.message.startswith("Undefined value")]
        if not free:
            return text
        for name in free:
            value = "%" + name
            arguments[value] = given.get(value) or FREE_TYPES.get(value, "index")
    raise AssertionError(f"block at line {block.line} keeps using undefined values")


def test_the_reference_has_the_blocks_we_expect():
    assert len(BLOCKS) >= 39
    assert any("foreach_tile" in b.text for b in BLOCKS) and any("cooperative_matrix_apply" in b.text for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"line{b.line}" for b in BLOCKS])
def test_every_block_parses_checks_and_prints_back(block):
    text = wrapped(block)
    program = parse(text)
    diagnostics = check(program)
    if "; Illegal" in block.text:
        assert [d.message for d in diagnostics] and "cannot be fused" in diagnostics[0].message
    else:
        assert not diagnostics, f"{text}\n" + "\n".join(map(str, diagnostics))
    assert parse(print_program(program)) == program
