"""Numpy emulations of stored weights: a graph whose weights are rounded as a format stores them, and what a float16
matrix-vector backend computes (the oracle of the cooperative-vector backend)."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from coopnn.graph import ops
from coopnn.graph.ir import Graph, Op
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16, round_fp16


def emulate_weights(graph: Graph, fmt: WeightFormat) -> Graph:
    """The graph with every LINEAR weight and bias rounded as format `fmt` stores them."""
    constants = dict(graph.constants)
    for node in graph.nodes:
        if node.op is Op.LINEAR:
            for name in node.inputs[1:]:
                constants[name] = fmt.emulate(graph.constants[name])
    return graph.replace(constants=constants)


def run_fp16_emulation(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What a float16 matrix-vector backend computes, in numpy: the oracle of the cooperative-vector backend.

    Inputs, every LINEAR's weights, bias, input and result (before its activation), and the float outputs are rounded
    to float16; everything else is the float32 reference (`coopnn.graph.ops`).
    """
    env: dict[str, np.ndarray] = dict(emulate_weights(graph, FP16).constants)
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
