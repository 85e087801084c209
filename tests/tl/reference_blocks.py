"""The code blocks of the tensor language reference, extracted from its text: runs of lines that read as tensor
language (an instruction, a value definition, a closing brace or a comment), list markers removed. A line carrying
its own operand types (`; %0: memref<...>`) is an example of its own."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# The reference lives in the project's shared folder beside the checkout (as CI lays it out), not in the repository.
REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "spec" / "tensor-language-reference.txt"

_CODE = re.compile(r"^\s*(?:%[\w, %]+=|}|;|[a-z_][a-z0-9_.]* (?:%|\(%|\d+,)|if %)")
_LIST_MARKER = re.compile(r"^\s*\d+\.\s+")
_OPERAND_TYPE = re.compile(r";\s*(%\w+):\s*(.+)$")


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the block's first line in the reference
    text: str
    operand_types: tuple[tuple[str, str], ...]  # from a `; %0: type` comment


def reference_available() -> bool:
    return REFERENCE.is_file()


def reference_text() -> str:
    return REFERENCE.read_text()


def _split_examples(start: int, lines: list[str]) -> list[Block]:
    blocks, pending = [], []
    for offset, line in enumerate(lines):
        typed = _OPERAND_TYPE.search(line)
        if typed and not line.lstrip().startswith(";"):
            text = line[:typed.start()].rstrip()
            blocks.append(Block(start + offset, "\n".join(pending + [text]), ((typed.group(1), typed.group(2)),)))
            pending = []
        else:
            pending.append(line)
    if any(not l.lstrip().startswith(";") for l in pending):
        blocks.append(Block(start + len(lines) - len(pending), "\n".join(pending), ()))
    return blocks


def code_blocks(text: str | None = None) -> list[Block]:
    lines = (text or reference_text()).splitlines()
    blocks, run, first = [], [], 0
    for number, line in enumerate(lines + [""], start=1):
        stripped = _LIST_MARKER.sub("", line)
        if _CODE.match(stripped) and "=/" not in stripped and not re.match(r"^\s*[a-z-]+\s+=", stripped):
            if not run:
                first = number
            run.append(stripped)
        elif run:
            blocks.extend(_split_examples(first, run))
            run = []
    return blocks
