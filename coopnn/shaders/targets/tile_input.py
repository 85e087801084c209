"""A tile plan's per-sample input stage (`TilePlan.input_stage`: an encoding, the gathers of the frequency encoding,
constant vectors, reductions, component-wise instructions) as float32 SPIR-V scalars for one sample, which the
cooperative-matrix tile targets run once per sample of a tile before its first product. Constant vectors are the
program's constants (compile-time); an encoding reads its parameter vector through the target's `read_vector`."""

from __future__ import annotations

from typing import Callable, Sequence

from coopnn.shaders.kernel.ops import KERNEL_OPS
from coopnn.shaders.spirv import Function, Id, Module
from coopnn.shaders.targets.encodings.registry import emit_encoding
from coopnn.shaders.targets.encodings.writer import EncodingWriter
from coopnn.shaders.targets.tile_epilogue import scalar_instruction
from coopnn.shaders.targets.tile_plan import TilePlan

VectorReader = Callable[[str, Id], Id]  # (vector parameter, element as a u32 id) -> float32 id


def emit_input_stage(module: Module, fn: Function, plan: TilePlan, inputs: Sequence[Id],
                     read_vector: VectorReader) -> list[Id]:
    """The value stage 0 starts from, one float32 id per component, for the sample whose input components are
    `inputs` (float32 ids)."""
    program = plan.program
    writer = EncodingWriter(module, fn)
    values: dict[str, list] = {program.body[0].result: list(inputs)}
    for instr in plan.input_stage:
        args = [values[a] for a in instr.args if a in values]
        if instr.op == "constant":
            values[instr.result] = [writer.scalars.splat(instr.attrs["value"], 1, instr.type.dtype)] * instr.type.size
        elif instr.op == "load":
            values[instr.result] = [writer.constant(float(v)) for v in program.constants[instr.args[0]]]
        elif instr.op == "gather":
            values[instr.result] = [args[s][c] for s, c in instr.attrs["index"]]
        elif instr.op == "encode":
            read = (lambda element, p=instr.args[1]: read_vector(p, element)) if len(instr.args) > 1 else None
            values[instr.result] = emit_encoding(EncodingWriter(module, fn, read), instr.attrs["encoding"], args[0])
        elif instr.op in ("reduce_sum", "reduce_max"):
            group, op = instr.attrs["group"], "add" if instr.op == "reduce_sum" else "max"
            values[instr.result] = [_fold(writer, op, args[0][g * group:(g + 1) * group])
                                    for g in range(instr.type.size)]
        elif KERNEL_OPS[instr.op].elementwise or instr.op == "cast":
            values[instr.result] = [scalar_instruction(writer.scalars, instr, list(row)) for row in zip(*args)]
    return values[plan.stages[0].source]


def _fold(writer: EncodingWriter, op: str, terms: list) -> Id:
    total = terms[0]
    for term in terms[1:]:
        total = writer.scalars.binary(op, total, term)
    return total
