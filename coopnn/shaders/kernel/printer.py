"""The text form of a kernel program, in the tensor language's syntax with the coopvector extension."""

from __future__ import annotations

from coopnn.shaders.kernel.program import Instr, KernelProgram


def _gather_index(instr: Instr) -> str:
    """Runs of consecutive components print as %src[a:b], single ones as %src[a]."""
    parts, index = [], list(instr.attrs["index"])
    i = 0
    while i < len(index):
        src, start = index[i]
        j = i
        while j + 1 < len(index) and index[j + 1] == (src, index[j][1] + 1):
            j += 1
        name = "%" + instr.args[src]
        parts.append(f"{name}[{start}]" if j == i else f"{name}[{start}:{index[j][1] + 1}]")
        i = j + 1
    return ", ".join(parts)


def _operands(instr: Instr, program: KernelProgram) -> str:
    op, args = instr.op, instr.args
    if op == "constant":
        return repr(float(instr.attrs["value"]))
    if op == "load":
        return f"%{args[0]}[:, %i]" if program.param(args[0]).role == "input" else f"%{args[0]}[]"
    if op == "store":
        if "layout" in instr.attrs:
            a = instr.attrs
            return f"%{args[0]}, %{args[1]}[{a['start']}:+{a['width']}, %i] {{layout={a['layout']}}}"
        return f"%{args[0]}, %{args[1]}[:, %i]"
    if op == "uniform":
        return f"%{instr.attrs['name']}"
    if op == "gather":
        return _gather_index(instr)
    if op in ("reduce_sum", "reduce_max"):
        return f"%{args[0]} {{group={instr.attrs['group']}}}"
    if op == "gemv":
        bias = f", %{args[2]}" if len(args) > 2 else ""
        return f"%{args[0]}, %{args[1]}{bias}"
    return ", ".join("%" + a for a in args)


def _line(instr: Instr, program: KernelProgram) -> str:
    name = instr.op + ((".t" if instr.attrs.get("transpose") else ".n") if instr.op == "gemv" else "")
    text = f"{name} {_operands(instr, program)}"
    if instr.result is None:
        return text
    return f"%{instr.result} = {text} : {instr.type}"


def print_program(program: KernelProgram, work_group_size: int = 64) -> str:
    args = ",\n    ".join(f"%{p.name}: {p.memref}" for p in program.params)
    lines = [
        f"; kernel {program.name}: one sample per work-item; coopvector<TxN> is coopnn's extension",
        f"func @{_identifier(program.name)}(\n    {args},\n    %n: index) "
        f"{{work_group_size=[{work_group_size},1]}} {{",
        "  %c0 = constant 0 : index",
        "  foreach (%i) = (%c0), (%n) {",
    ]
    lines += ["    " + _line(instr, program) for instr in program.body]
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def _identifier(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "kernel"
    return cleaned if cleaned[0].isalpha() else "k_" + cleaned
