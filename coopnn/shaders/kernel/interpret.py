"""A numpy interpreter of kernel programs: checks the lowering against the graph without any GPU or SPIR-V.

Each instruction computes its numpy meaning from the instruction table (`coopnn.shaders.kernel.ops`) in float32.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from coopnn.shaders.kernel.ops import KERNEL_OPS, OUTPUT, VALUE, Batch
from coopnn.shaders.kernel.program import Instr, KernelProgram


def _step(instr: Instr, env: dict, params: Mapping[str, np.ndarray], batch: Batch, stored: dict) -> None:
    definition = KERNEL_OPS[instr.op]
    kinds = definition.kinds(len(instr.args))
    operands = [None if kind == OUTPUT else (env if kind == VALUE else params)[name]
                for name, kind in zip(instr.args, kinds)]
    result = definition.numpy(*operands) if definition.elementwise else definition.numpy(instr, operands, batch)
    if instr.result is None:
        stored[instr.args[kinds.index(OUTPUT)]] = result
        return
    env[instr.result] = result.astype(bool if instr.type.dtype == "bool" else np.float32)


def run_program(program: KernelProgram, feeds: Mapping[str, np.ndarray],
                uniforms: Mapping[str, float] | None = None) -> dict[str, np.ndarray]:
    """Run `program` on float32 inputs keyed by graph input name, with the push-constant values `uniforms` (the
    instruction `uniform` reads them); returns outputs keyed by graph output name."""
    batch = Batch(next(iter(feeds.values())).shape[0], dict(uniforms or {}))
    params = dict(program.constants)
    for p in program.params_of("input"):
        params[p.name] = np.asarray(feeds[p.graph_name], np.float32).reshape(batch.samples, -1)
    env: dict[str, np.ndarray] = {}
    stored: dict[str, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for instr in program.body:
            _step(instr, env, params, batch, stored)
    return {p.graph_name: stored[p.name] for p in program.params_of("output")}
