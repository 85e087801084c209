"""The coopmat2 kernel's steps run in numpy, one work-group's tile after another, through the tensor-addressing model
(`coopnn.layouts.tensor_memory`): what the GPU computes but for the order of its float32 sums, and where every load
and store of a ragged tail lands (a load or store outside its buffer raises, an output element never stored stays
NaN). A per-sample input stage's rows are its instructions' numpy meaning. Each weight entry is read as the format stores it (float16 or float32 elements, or the structured blocks of a
block format); a load naming a decode function decodes with `decode_weights` (and `decode_weight_vectors` for its
DecodeVectorFunc): the shader's decode functions (`coopnn.backends.coopmat2.decode`) in numpy."""

from __future__ import annotations

import numpy as np

from coopnn.backends.coopmat2.steps import STAGED, Apply, Convert, Load, MulAdd, Store, TileKernel
from coopnn.shaders.kernel.ops import KERNEL_OPS, OUTPUT, PARAM, Batch
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import round_fp16
from coopnn.layouts.pack import WeightImage
from coopnn.layouts.tensor_memory import load, store

DTYPES = {"f16": np.float16, "f32": np.float32}


def decode_weights(fmt: WeightFormat):
    """The DecodeFunc of `fmt` in numpy: float16(d * (q - zero)) of code coordInBlock[1] of each block."""
    def decode(memory, index, block_coord, coord_in_block):
        return fmt.decode(memory[index][:, None])[np.arange(index.size), coord_in_block[1]].astype(np.float16)
    return decode


def decode_weight_vectors(fmt: WeightFormat, width: int):
    """The DecodeVectorFunc of `fmt` in numpy: `width` codes from coordInBlock[1] on."""
    def decode(memory, index, block_coord, coord_in_block):
        columns = coord_in_block[1][:, None] + np.arange(width)
        return fmt.decode(memory[index][:, None])[np.arange(index.size)[:, None], columns].astype(np.float16)
    return decode


def weight_memory(packed: WeightImage) -> dict[str, np.ndarray]:
    """Each weight entry as a 1-D array of what its format stores per element."""
    memory = {}
    for name, e in packed.entries.items():
        storage = weight_format(e.dtype).storage
        memory[name] = np.frombuffer(packed.data, storage, count=e.size // storage.itemsize, offset=e.offset)
    return memory


def _load(step: Load, memory: np.ndarray, operands: dict) -> np.ndarray:
    view = step.view.numpy() if step.view is not None else None
    layout = step.layout.numpy(operands)
    if step.decode is None:
        return load(memory, layout, step.type.rows, step.type.cols, view=view)
    fmt = weight_format(step.decode)
    vector = None if step.decode_vector is None else (step.decode_vector,
                                                      decode_weight_vectors(fmt, step.decode_vector))
    return load(memory, layout, step.type.rows, step.type.cols, view=view, dtype=np.float16,
                decode=decode_weights(fmt), decode_vector=vector)


def staged_rows(kernel: TileKernel, x: np.ndarray, first: int) -> np.ndarray:
    """The float16 rows a per-sample input stage leaves in workgroup memory for the tile from sample `first`: the
    stage's instructions by their numpy meaning, 0 past the batch (flattened)."""
    plan, program = kernel.plan, kernel.plan.program
    rows = np.minimum(np.arange(first, first + kernel.tile), x.shape[0] - 1)
    env = {program.body[0].result: np.asarray(x[rows], np.float32)}
    batch = Batch(kernel.tile, {})
    for instr in plan.input_stage:
        op = KERNEL_OPS[instr.op]
        kinds = op.kinds(len(instr.args))
        operands = [program.constants[a] if kind == PARAM else env[a] for a, kind in zip(instr.args, kinds)
                    if kind != OUTPUT]
        value = op.numpy(*operands) if op.elementwise else op.numpy(instr, operands, batch)
        env[instr.result] = np.broadcast_to(value, (kernel.tile, instr.type.size)).astype(
            bool if instr.type.dtype == "bool" else np.float32)
    staged = env[plan.stages[0].source].copy()
    staged[first + np.arange(kernel.tile) >= x.shape[0]] = 0
    return round_fp16(staged).astype(np.float16).ravel()


def run_steps(kernel: TileKernel, packed: WeightImage, x: np.ndarray) -> np.ndarray:
    """The outputs (samples x features, float32) of the kernel's steps for inputs `x` (samples x features)."""
    plan = kernel.plan
    samples = x.shape[0]
    output = np.full(samples * plan.output.shape[0], np.nan, np.float32)
    memory = weight_memory(packed)
    memory |= {plan.input.name: np.ascontiguousarray(x, np.float32).ravel(), plan.output.name: output}
    for first in range(0, samples, kernel.tile):
        operands = {"n": samples, "i": first}
        values: dict[str, np.ndarray] = {}
        if plan.input_stage:
            memory[STAGED] = staged_rows(kernel, x, first)
        for step in kernel.steps:
            if isinstance(step, Load):
                values[step.result] = _load(step, memory[step.param], operands)
            elif isinstance(step, Convert):
                values[step.result] = values[step.source].astype(DTYPES[step.type.component])
            elif isinstance(step, MulAdd):
                product = values[step.a].astype(np.float32) @ values[step.b].astype(np.float32)
                values[step.result] = product + (values[step.c] if step.c is not None else 0)
            elif isinstance(step, Apply):
                y = plan.stages[step.stage].evaluate(round_fp16(values[step.source]), plan.constants)
                if step.mask is not None:
                    y = np.where(np.arange(y.shape[1]) < step.mask, y, 0)
                values[step.result] = (round_fp16(y) if step.round_result else y).astype(np.float32)
            elif isinstance(step, Store):
                store(memory[step.param], values[step.source].astype(np.float32), step.layout.numpy(operands))
    return output.reshape(samples, -1)
