"""A tile stage's start rounded to float16 and its epilogue, as float32 SPIR-V scalars (`ScalarWriter`): the
cooperative-matrix tile targets run it on matrix components, coopmat2 in the function of an
OpCooperativeMatrixPerElementOpNV, coopmat on each component an invocation holds."""

from __future__ import annotations

from coopnn.shaders.kernel.program import Instr
from coopnn.shaders.spirv import Id
from coopnn.shaders.targets.scalar_math import COMPARISONS
from coopnn.shaders.targets.scalar_writer import ScalarWriter
from coopnn.shaders.targets.tile_plan import Stage, TilePlan


def round_fp16(writer: ScalarWriter, x: Id) -> Id:
    """float32 `x` rounded to float16 (nearest even) and widened back."""
    half = writer.fn.ops.float_convert(writer.m.type_float(16), x)
    return writer.fn.ops.float_convert(writer.f32, half)


def scalar_instruction(writer: ScalarWriter, instr: Instr, args: list[Id]) -> Id:
    """One component of the component-wise instruction `instr` on one scalar of each operand."""
    if instr.op in COMPARISONS:
        return writer.compare(instr.op, *args)
    if instr.op == "select":
        return writer.select(*args)
    if instr.op == "cast":
        return writer.cast(args[0], instr.type.dtype)
    if len(args) == 1:
        return writer.unary(instr.op, args[0])
    return writer.binary(instr.op, *args)


def emit_stage(writer: ScalarWriter, plan: TilePlan, stage: Stage, x: Id) -> Id:
    """The stage's result for the float32 component `x` of its start: x rounded to float16, then the epilogue."""
    types = plan.program.value_types()
    values = {stage.source: round_fp16(writer, x)}
    for instr in stage.epilogue:
        args = [values[a] if a in values else writer.splat(plan.constants[a], 1, types[a].dtype) for a in instr.args]
        values[instr.result] = scalar_instruction(writer, instr, args)
    return values[stage.result]
