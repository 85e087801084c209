"""A numpy interpreter of kernel programs: checks the lowering against the graph without any GPU or SPIR-V."""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from coopnn.shaders.kernel.program import Instr, KernelProgram

_F = np.float32
_UNARY: dict[str, Callable] = {
    "abs": np.abs, "neg": np.negative, "not": np.logical_not, "exp": np.exp, "log": np.log, "sin": np.sin,
    "cos": np.cos, "tanh": np.tanh, "sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "sign": np.sign,
}
_BINARY: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
    "min": np.minimum, "pow": np.power, "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
    "cmp.lt": np.less, "cmp.le": np.less_equal, "cmp.gt": np.greater, "cmp.ge": np.greater_equal,
    "cmp.eq": np.equal,
}


def _step(instr: Instr, env: dict, params: Mapping[str, np.ndarray], batch: int, outputs: dict) -> None:
    op, args = instr.op, instr.args
    if op == "load":
        data = params[args[0]]
        result = data.reshape(batch, -1) if data.ndim == 2 and data.shape[0] == batch else np.broadcast_to(
            data.reshape(1, -1), (batch, data.size))
    elif op == "store":
        outputs[args[1]] = env[args[0]]
        return
    elif op == "constant":
        result = np.full((batch, instr.type.size), instr.attrs["value"], _F if instr.type.dtype == "f32" else bool)
    elif op == "gemv":
        w = params[args[0]]
        result = env[args[1]] @ w.T
        if len(args) > 2:
            result = result + params[args[2]]
    elif op == "select":
        result = np.where(env[args[0]], env[args[1]], env[args[2]])
    elif op == "gather":
        result = np.stack([env[args[s]][:, c] for s, c in instr.attrs["index"]], axis=1)
    elif op in ("reduce_sum", "reduce_max"):
        x = env[args[0]].reshape(batch, -1, instr.attrs["group"])
        result = x.sum(axis=2) if op == "reduce_sum" else x.max(axis=2)
    elif op == "cast":
        x = env[args[0]]
        result = (x != 0) if instr.type.dtype == "bool" else x.astype(_F)
    elif op in _UNARY:
        result = _UNARY[op](env[args[0]])
    else:
        result = _BINARY[op](env[args[0]], env[args[1]])
    env[instr.result] = result.astype(bool if instr.type.dtype == "bool" else _F)


def run_program(program: KernelProgram, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run `program` on float32 inputs keyed by graph input name; returns outputs keyed by graph output name."""
    batch = next(iter(feeds.values())).shape[0]
    params = dict(program.constants)
    for p in program.params_of("input"):
        params[p.name] = np.asarray(feeds[p.graph_name], _F).reshape(batch, -1)
    env: dict[str, np.ndarray] = {}
    stored: dict[str, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for instr in program.body:
            _step(instr, env, params, batch, stored)
    return {p.graph_name: stored[p.name] for p in program.params_of("output")}
