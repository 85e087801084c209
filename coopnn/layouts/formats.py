"""Weight formats by name, each with the numpy emulation of its rounding (the oracle for quantized backends)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from coopnn.graph import ops
from coopnn.graph.ir import Graph, Op


@dataclass(frozen=True)
class WeightFormat:
    name: str
    description: str
    emulate: Callable[[np.ndarray], np.ndarray]  # float32 weights -> float32 values the format can hold


def _round_to(dtype) -> Callable[[np.ndarray], np.ndarray]:
    return lambda w: np.asarray(w, np.float32).astype(dtype).astype(np.float32)


FORMATS: dict[str, WeightFormat] = {
    f.name: f
    for f in (
        WeightFormat("fp32", "32-bit float weights, as the model stores them", lambda w: np.asarray(w, np.float32)),
        WeightFormat("fp16", "16-bit float weights (round to nearest even)", _round_to(np.float16)),
    )
}


def weight_format(name: str) -> WeightFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown weight format {name!r}; supported: {', '.join(FORMATS)}") from None


def emulate_weights(graph: Graph, fmt: str) -> Graph:
    """The graph with every LINEAR weight and bias rounded as format `fmt` stores them."""
    emulate = weight_format(fmt).emulate
    constants = dict(graph.constants)
    for node in graph.nodes:
        if node.op is Op.LINEAR:
            for name in node.inputs[1:]:
                constants[name] = emulate(graph.constants[name])
    return graph.replace(constants=constants)


def round_fp16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest float16 (ties to even, beyond its range to inf), as float32."""
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def run_fp16_emulation(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What a float16 matrix-vector backend computes, in numpy: the oracle of the cooperative-vector backend.

    Inputs, every LINEAR's weights, bias, input and result (before its activation), and the float outputs are rounded
    to float16; everything else is the float32 reference (`coopnn.graph.ops`).
    """
    env: dict[str, np.ndarray] = dict(emulate_weights(graph, "fp16").constants)
    env.update({name: round_fp16(x) for name, x in feeds.items()})
    for node in graph.nodes:
        inputs = [env[name] for name in node.inputs]
        if node.op is Op.LINEAR:
            y = round_fp16(ops.evaluate(Op.LINEAR, [round_fp16(inputs[0]), *inputs[1:]], {}))
            act = node.activation
            env[node.outputs[0]] = y if act is None else ops.evaluate(act.op, [y], act.attrs)
        else:
            env[node.outputs[0]] = ops.evaluate(node.op, inputs, node.attrs)
    batch = next(iter(feeds.values())).shape[0]
    out = {}
    for v in graph.outputs:
        array = np.broadcast_to(env[v.name], (batch,) + v.features)
        out[v.name] = array if v.dtype == "bool" else round_fp16(array)
    return out
