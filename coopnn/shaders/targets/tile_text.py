"""What the text forms of the cooperative-matrix tile targets (coopmat2, coopmat) share: the function around the loop
over tiles, matrix types, and a stage's start and epilogue as scalar instructions in the tensor language's syntax
(the region of a `cooperative_matrix_apply`, or the body of an element copy)."""

from __future__ import annotations

import re
from typing import Sequence

from coopnn.shaders.kernel.ops import KERNEL_OPS
from coopnn.shaders.kernel.printer import identifier
from coopnn.shaders.targets.tile_plan import Stage, TilePlan


# the tensor language's names of the cooperative-matrix uses (SPIR-V's CooperativeMatrixUse)
USE_NAMES = {"MatrixAKHR": "matrix_a", "MatrixBKHR": "matrix_b", "MatrixAccumulatorKHR": "matrix_acc"}


def matrix_type(component: str, rows: int, cols: int, use: str) -> str:
    """The tensor language's type of a `rows` x `cols` cooperative matrix of `component` ("f16", "f32") for `use`
    (SPIR-V's name)."""
    return f"coopmatrix<{component}x{rows}x{cols},{USE_NAMES[use]}>"


def stage_lines(plan: TilePlan, stage: Stage, value: str) -> tuple[list[str], str]:
    """The stage on the float32 scalar `value` (a local identifier): rounded to float16 and back as `%x`, then its
    epilogue's instructions (each splat constant defined before its first use); and the identifier of the result."""
    lines = [f"%h = cast {value} : f16", "%x = cast %h : f32"]
    start = re.compile(rf"%{re.escape(stage.source)}\b")
    printed = set()
    for instr in stage.epilogue:
        for constant in (a for a in instr.args if a in plan.constants and a not in printed):
            printed.add(constant)
            lines.append(f"%{constant} = constant {float(plan.constants[constant])!r} : f32")
        line = start.sub("%x", KERNEL_OPS[instr.op].line(instr, plan.program))
        lines.append(f"%{instr.result} = {line} : {instr.type.dtype}")
    return lines, "%x" if stage.result == stage.source else f"%{stage.result}"


def input_stage_lines(plan: TilePlan) -> list[str]:
    """A per-sample input stage (`TilePlan.input_stage`) for sample %sample: its input's load, then its instructions
    in the kernel program's syntax."""
    program = plan.program
    load = program.body[0]
    lines = [f"%{load.result} = load %{plan.input.name}[:, %sample] : {load.type}"]
    for instr in plan.input_stage:
        line = KERNEL_OPS[instr.op].line(instr, program).replace("%i]", "%sample]")
        lines.append(f"%{instr.result} = {line} : {instr.type}")
    return lines


def tile_function(name: str, params: Sequence[tuple[str, str]], work_group_size: tuple[int, int], tile: int,
                  body: Sequence[str]) -> list[str]:
    """`func @name` over `params` ((declaration, comment or ""), then the batch size %n) whose body is a
    `foreach_tile` of `tile` samples (%i the first, %ti those in the batch) holding the `body` lines."""
    args = [f"    {declaration},{'  ; ' + comment if comment else ''}" for declaration, comment in params]
    return [
        f"func @{identifier(name)}(",
        *args,
        f"    %n: index) {{work_group_size=[{work_group_size[0]},{work_group_size[1]}]}} {{",
        "  %c0 = constant 0 : index",
        f"  foreach_tile (%i) = (%c0), (%n) as (%ti) <= ({tile}) {{",
        *body,
        "  }",
        "}",
    ]
