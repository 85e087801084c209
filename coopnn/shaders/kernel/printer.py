"""The text form of a kernel program, in the tensor language's syntax with the coopvector extension; each
instruction's own syntax is its row of the instruction table (`coopnn.shaders.kernel.ops`)."""

from __future__ import annotations

from coopnn.shaders.kernel.ops import KERNEL_OPS
from coopnn.shaders.kernel.program import Instr, KernelProgram


def _line(instr: Instr, program: KernelProgram) -> str:
    text = KERNEL_OPS[instr.op].line(instr, program)
    if instr.result is None:
        return text
    return f"%{instr.result} = {text} : {instr.type}"


def print_program(program: KernelProgram, work_group_size: int = 64) -> str:
    args = ",\n    ".join(f"%{p.name}: {p.memref}" for p in program.params)
    lines = [
        f"; kernel {program.name}: one sample per work-item; coopvector<TxN> is coopnn's extension",
        f"func @{identifier(program.name)}(\n    {args},\n    %n: index) "
        f"{{work_group_size=[{work_group_size},1]}} {{",
        "  %c0 = constant 0 : index",
        "  foreach (%i) = (%c0), (%n) {",
    ]
    lines += ["    " + _line(instr, program) for instr in program.body]
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def identifier(name: str) -> str:
    """`name` as a tensor-language function name: letters, digits and underscores, starting with a letter."""
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "kernel"
    return cleaned if cleaned[0].isalpha() else "k_" + cleaned
