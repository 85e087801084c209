"""The kernel programs the cooperative-matrix tile targets take (coopmat2, coopmat), read as a chain of stages.

A tile kernel carries a tile of samples through every layer as matrices, so it takes a program that is one chain: the
one input loaded, then stages, each a `gemv` (no transpose) of the previous stage's value followed by an epilogue of
component-wise instructions on its result and splat constants, and the last stage's value stored into the one output.
The input load starts stage 0, whose epilogue (if any) runs before the first product. Where what comes before the
first product is not component-wise (an input encoding, the frequency encoding's gathers, constant vectors,
reductions), it is the plan's per-sample `input_stage` instead: the targets run those instructions for each sample of
the tile (`coopnn.shaders.targets.tile_input`) and stage 0 starts from their result, with no epilogue. Every other
instruction outside this shape is refused with a CompileError naming it and why: several inputs or outputs, a value
used again after the next layer (a skip or residual connection), gathers, reductions and per-feature constant
vectors after the first product, and training instructions.

Numerics, those of `coopnn.layouts.formats.emulation.run_fp16_emulation`: a stage's value is rounded to float16 as
it starts (the rounded input or product), its epilogue runs in float32, and the result is rounded to float16 again as
the next product's A matrix or as the output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from coopnn.errors import CompileError
from coopnn.layouts.formats.fp16 import round_fp16
from coopnn.shaders.kernel.ops import KERNEL_OPS, Batch
from coopnn.shaders.kernel.program import Instr, KernelProgram, Param, VecType

# What an instruction the tile targets refuse is, for the message that names it.
_REFUSED = {
    "gather": "a gather (slice, concatenation, reshape or broadcast of features)",
    "reduce_sum": "a reduction over features (softmax, layer normalisation, a mean)",
    "reduce_max": "a reduction over features (softmax, a maximum)",
    "uniform": "a training instruction",
    "sample_mask": "a training instruction",
    "accumulate_outer": "a training instruction",
    "accumulate_sum": "a training instruction",
}


@dataclass(frozen=True)
class Stage:
    """One layer of the chain: the product `matrix` x + `bias` (stage 0: the loaded input), then `epilogue`."""

    source: str  # the kernel value the stage starts from: the gemv's result, or the input load's
    result: str  # the value it hands on: the next gemv's operand, or the stored value
    width: int  # components of every value of the stage (the product's rows; the input's features)
    epilogue: tuple[Instr, ...]  # component-wise instructions, in program order
    matrix: str | None = None  # the gemv's matrix parameter; None for stage 0
    bias: str | None = None
    columns: int = 0  # the product's columns (the previous stage's width)

    def evaluate(self, x: np.ndarray, constants: Mapping[str, float | bool]) -> np.ndarray:
        """The stage's epilogue on float32 `x` (the stage's rounded start, any shape), by the instructions' numpy
        meaning: what a tile kernel computes per component."""
        env: dict[str, np.ndarray] = {self.source: np.asarray(x, np.float32)}
        batch = Batch(1, {})
        with np.errstate(all="ignore"):
            for instr in self.epilogue:
                args = [env[a] if a in env else np.asarray(constants[a]) for a in instr.args]
                op = KERNEL_OPS[instr.op]
                if op.elementwise:
                    value = op.numpy(*args)
                else:  # cast, the one component-wise instruction declared with a whole-batch meaning
                    value = op.numpy(instr, [np.broadcast_to(args[0], np.shape(x))], batch)
                env[instr.result] = np.asarray(value, np.float32 if instr.type.dtype == "f32" else bool)
        return np.broadcast_to(env[self.result], np.shape(x))

    def finite_at_zero(self, constants: Mapping[str, float | bool]) -> bool:
        """Whether the epilogue of 0, rounded to float16, is finite: padding columns of a product are 0, and the next
        product multiplies them (as float16) by zero weights, which only a non-finite value (0 x inf) turns into
        NaN."""
        return bool(np.isfinite(round_fp16(self.evaluate(np.zeros(1, np.float32), constants))).all())


@dataclass(frozen=True)
class TilePlan:
    """A kernel program read as a chain: `stages[0]` starts from the input, each later one from a product."""

    program: KernelProgram
    input: Param
    output: Param
    stages: tuple[Stage, ...]
    constants: Mapping[str, float | bool]  # splat constants by kernel value
    # the instructions after the input load that every sample runs before the first product, where they are not
    # component-wise (then stage 0 starts from their result); empty otherwise
    input_stage: tuple[Instr, ...] = ()

    @property
    def products(self) -> tuple[Stage, ...]:
        return self.stages[1:]


def _refuse(target: str, program: KernelProgram, why: str) -> CompileError:
    return CompileError(f"the {target} target cannot run kernel {program.name!r}: {why}")


def plan_tiles(program: KernelProgram, target: str) -> TilePlan:
    """`program` as a chain of stages, or CompileError naming the first instruction the `target` cannot take."""
    inputs, outputs = program.params_of("input"), program.params_of("output")
    others = [p for p in program.params if p.role not in ("input", "output", "matrix", "vector")]
    if others:
        raise _refuse(target, program, f"it is a training kernel (parameter {others[0].name} of role "
                                       f"{others[0].role}); the tile targets run inference only")
    if len(inputs) != 1 or len(outputs) != 1:
        raise _refuse(target, program, f"it has {len(inputs)} input(s) and {len(outputs)} output(s); a tile of "
                                       "samples goes through one chain of layers, from one input to one output")
    body = program.body
    first = body[0] if body else None
    if first is None or first.op != "load" or first.args[0] != inputs[0].name:
        raise _refuse(target, program, "it does not start by loading its input")
    constants = {i.result: i.attrs["value"] for i in body if i.op == "constant"}
    types = program.value_types()
    input_stage = _input_stage(target, program, body)
    stages: list[Stage] = []
    if input_stage:
        operand = body[len(input_stage) + 1].args[1]
        current = Stage(operand, operand, types[operand].size, ())
        members = {operand}
    else:
        current = Stage(first.result, first.result, first.type.size, ())
        members = {first.result}
    stored = False
    for instr in body[1 + len(input_stage):]:
        if stored:
            raise _refuse(target, program, f"instruction {instr.op!r} follows the store of the output")
        if instr.op == "constant":
            continue
        outside = [a for a in instr.args if a in types and a not in members and a not in constants]
        if instr.op == "gemv":
            _check_product(target, program, instr, current, members, types)
            stages.append(_closed(current, instr.args[1]))
            rows, cols = program.param(instr.args[0]).shape
            current = Stage(instr.result, instr.result, rows, (), instr.args[0],
                            instr.args[2] if len(instr.args) > 2 else None, cols)
            members = {instr.result}
        elif instr.op == "store":
            if outside:
                raise _refuse(target, program, _reuse(outside[0]))
            stages.append(_closed(current, instr.args[0]))
            stored = True
        elif instr.op == "load":
            param = program.param(instr.args[0])
            what = "per-feature constant vector" if param.role == "vector" else param.role
            raise _refuse(target, program, f"instruction 'load' of the {what} {param.name} (a tile kernel's "
                                           "epilogues take the layer's value and splat constants only)")
        elif KERNEL_OPS[instr.op].elementwise or instr.op == "cast":
            if outside:
                raise _refuse(target, program, _reuse(outside[0]))
            current = Stage(current.source, current.result, current.width, current.epilogue + (instr,),
                            current.matrix, current.bias, current.columns)
            members.add(instr.result)
        else:
            what = _REFUSED.get(instr.op, "not component-wise")
            raise _refuse(target, program, f"instruction {instr.op!r} is {what}")
    if not stored:
        raise _refuse(target, program, "it never stores its output")
    if len(stages) < 2:
        raise _refuse(target, program, "it has no Linear layer, so there is no matrix product to run on tensor cores")
    return TilePlan(program, inputs[0], outputs[0], tuple(stages), constants, input_stage)


# What a per-sample input stage may hold besides component-wise instructions.
_PER_SAMPLE = ("constant", "gather", "encode", "load", "reduce_sum", "reduce_max")


def _input_stage(target: str, program: KernelProgram, body: tuple[Instr, ...]) -> tuple[Instr, ...]:
    """The instructions between the input load and the first product when one of them is not component-wise (an
    encoding, a gather, a constant vector, a reduction), else (); CompileError for one no sample can run alone."""
    end = next((n for n, instr in enumerate(body) if instr.op == "gemv"), len(body))
    prefix = body[1:end]
    if all(KERNEL_OPS[i.op].elementwise or i.op in ("cast", "constant") for i in prefix) or end == len(body):
        return ()
    for instr in prefix:
        if instr.op == "load" and program.param(instr.args[0]).role != "vector":
            raise _refuse(target, program, f"instruction 'load' of the {program.param(instr.args[0]).role} "
                                           f"{instr.args[0]} comes before the first product")
        if not (KERNEL_OPS[instr.op].elementwise or instr.op == "cast" or instr.op in _PER_SAMPLE):
            raise _refuse(target, program, f"instruction {instr.op!r} is {_REFUSED.get(instr.op, 'not per-sample')}")
    return prefix


def _check_product(target: str, program: KernelProgram, instr: Instr, current: Stage, members: set[str],
                   types: Mapping[str, VecType]) -> None:
    if instr.attrs.get("transpose"):
        raise _refuse(target, program, "a product with a transposed matrix (gemv.t) is a training instruction")
    if instr.args[1] not in members:
        raise _refuse(target, program, _reuse(instr.args[1]))
    if types[instr.args[1]] != VecType("f32", current.width):
        raise _refuse(target, program, f"the product's operand %{instr.args[1]} is not the layer's value")


def _closed(stage: Stage, result: str) -> Stage:
    return Stage(stage.source, result, stage.width, stage.epilogue, stage.matrix, stage.bias, stage.columns)


def _reuse(value: str) -> str:
    return (f"value %{value} is used after the next layer began (a skip or residual connection); a tile kernel "
            "carries one value from layer to layer")
