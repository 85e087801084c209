"""A tile stage's start rounded to float16 and its epilogue, as float32 SPIR-V scalars (`ScalarWriter`): the
cooperative-matrix tile targets run it on matrix components, coopmat2 in the function of an
OpCooperativeMatrixPerElementOpNV, coopmat on each component an invocation holds."""

from __future__ import annotations

from coopnn.shaders.spirv import Id
from coopnn.shaders.targets.scalar_math import COMPARISONS
from coopnn.shaders.targets.scalar_writer import ScalarWriter
from coopnn.shaders.targets.tile_plan import Stage, TilePlan


def round_fp16(writer: ScalarWriter, x: Id) -> Id:
    """float32 `x` rounded to float16 (nearest even) and widened back."""
    half = writer.fn.emit("OpFConvert", writer.m.type_float(16), x)
    return writer.fn.emit("OpFConvert", writer.f32, half)


def emit_stage(writer: ScalarWriter, plan: TilePlan, stage: Stage, x: Id) -> Id:
    """The stage's result for the float32 component `x` of its start: x rounded to float16, then the epilogue."""
    types = plan.program.value_types()
    values = {stage.source: round_fp16(writer, x)}
    for instr in stage.epilogue:
        args = [values[a] if a in values else writer.splat(plan.constants[a], 1, types[a].dtype) for a in instr.args]
        if instr.op in COMPARISONS:
            values[instr.result] = writer.compare(instr.op, *args)
        elif instr.op == "select":
            values[instr.result] = writer.select(*args)
        elif instr.op == "cast":
            values[instr.result] = writer.cast(args[0], instr.type.dtype)
        elif len(args) == 1:
            values[instr.result] = writer.unary(instr.op, args[0])
        else:
            values[instr.result] = writer.binary(instr.op, *args)
    return values[stage.result]
