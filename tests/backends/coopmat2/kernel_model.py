"""The coopmat2 kernel's steps run in numpy, one work-group's tile after another, through the tensor-addressing model
(`coopnn.layouts.tensor_memory`): what the GPU computes but for the order of its float32 sums, and where every load
and store of a ragged tail lands (a load or store outside its buffer raises, an output element never stored stays
NaN)."""

from __future__ import annotations

import numpy as np

from coopnn.backends.coopmat2.steps import Apply, Convert, Load, MulAdd, Store, TileKernel
from coopnn.layouts.formats.fp16 import round_fp16
from coopnn.layouts.pack import WeightImage
from coopnn.layouts.tensor_memory import load, store

DTYPES = {"f16": np.float16, "f32": np.float32}


def run_steps(kernel: TileKernel, packed: WeightImage, x: np.ndarray) -> np.ndarray:
    """The outputs (samples x features, float32) of the kernel's steps for inputs `x` (samples x features)."""
    plan = kernel.plan
    samples = x.shape[0]
    output = np.full(samples * plan.output.shape[0], np.nan, np.float32)
    halves = np.frombuffer(packed.data, np.float16)
    memory = {name: halves[e.offset // 2:(e.offset + e.size) // 2] for name, e in packed.entries.items()}
    memory |= {plan.input.name: np.ascontiguousarray(x, np.float32).ravel(), plan.output.name: output}
    for first in range(0, samples, kernel.tile):
        operands = {"n": samples, "i": first}
        values: dict[str, np.ndarray] = {}
        for step in kernel.steps:
            if isinstance(step, Load):
                view = step.view.numpy() if step.view is not None else None
                values[step.result] = load(memory[step.param], step.layout.numpy(operands), step.type.rows,
                                           step.type.cols, view=view)
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
