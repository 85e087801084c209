"""Numpy emulations of stored weights: a graph whose weights are rounded as a format stores them, and the float16
arithmetic of the cooperative-vector kernels (their oracle, and the arithmetic the 8-bit float formats define on every
backend).

The float16 arithmetic (`run_fp16_emulation`): inputs are rounded to float16 as they arrive, and the float outputs as
they leave; every other operator runs in float32 (`coopnn.graph.ops`). A LINEAR rounds its input x to float16, then:

- weights stored unscaled (fp16): y = fp16(W x + b), W and b as the format stores them, summed in float32;
- weights with row scales (`WeightFormat.row_scales`: fp8_e4m3, fp8_e5m2), in this order, each step rounded:
  1. p[r] = fp16(sum over c of Q[r, c] x[c]), Q the stored (unscaled) elements: each product is exact in float32
     (at most 4 + 11 significant bits), and they are summed in float32 in column order c = 0, 1, ..., from +0.
     The input stays float16: the cooperative-vector combinations for these formats (`f16/e4m3/e4m3/f16/f16`,
     `f16/e5m2/e5m2/f16/f16`) name the 8-bit type as the input's interpretation, and SPV_NV_cooperative_vector
     leaves that float conversion to the implementation ("preserves the value as accurately as reasonably
     possible"); the H100's driver keeps every float16 input exactly (`tests/backends/coopvec/test_fp8.py` checks
     all 63488 finite ones);
  2. t[r] = fp16(p[r] * s[r]), s the row's float16 scale;
  3. y[r] = fp16(t[r] + b[r]), b the float16 bias (no bias: y = t);
  then its activation in float32. The portable shader follows the same steps and order, so it matches bit for bit
  (its float32 operators aside); cooperative-vector hardware sums step 1 in its own order.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from coopnn.graph import ops
from coopnn.graph.ir import Graph, Node, Op
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16, round_fp16


def emulate_weights(graph: Graph, fmt: WeightFormat) -> Graph:
    """The graph with every LINEAR weight rounded as format `fmt` stores matrices and every bias, and every
    encoding's parameter vector (a grid's tables), as it stores vectors (unscaled formats; CompileError naming a
    matrix the format cannot store)."""
    constants = dict(graph.constants)
    for node in graph.nodes:
        if node.op is Op.ENCODING and len(node.inputs) > 1:
            constants[node.inputs[1]] = fmt.vectors.emulate(graph.constants[node.inputs[1]])
        if node.op is Op.LINEAR:
            weight, *bias = node.inputs[1:]
            constants[weight] = fmt.emulate(graph.constants[weight], f"matrix {weight!r}")
            for name in bias:
                constants[name] = fmt.vectors.emulate(graph.constants[name])
    return graph.replace(constants=constants)


def run_with_linears(graph: Graph, env: dict[str, np.ndarray], linear: Callable[[Node, list[np.ndarray]], np.ndarray],
                      batch: int) -> dict[str, np.ndarray]:
    """Every node of `graph` on `env` (its constants and feeds, by name): each LINEAR's product and bias by
    `linear(node, inputs)`, then its activation in float32, every other operator in float32; the outputs broadcast to
    `batch` samples. The walk a weight format's own arithmetic (this module's, `coopnn.layouts.formats.integer`'s)
    runs its Linears in."""
    for node in graph.nodes:
        inputs = [env[name] for name in node.inputs]
        if node.op is Op.LINEAR:
            y = linear(node, inputs)
            act = node.activation
            env[node.outputs[0]] = y if act is None else ops.evaluate(act.op, [y], act.attrs)
        else:
            env[node.outputs[0]] = ops.evaluate(node.op, inputs, node.attrs)
    return {v.name: np.broadcast_to(env[v.name], (batch,) + v.features) for v in graph.outputs}


def scaled_product(x: np.ndarray, elements: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Steps 1 and 2 above: fp16(fp16(Q x) * s) for float16-valued x (..., columns) and decoded elements Q."""
    acc = np.zeros(x.shape[:-1] + (elements.shape[0],), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):  # infinities and NaN propagate as on the GPU
        for c in range(elements.shape[1]):
            acc += x[..., c:c + 1] * elements[:, c]
        return round_fp16(round_fp16(acc) * scales)


class Float16Emulation:
    """The float16 arithmetic of the module docstring for `graph` with weights stored in `fmt`, prepared once (the
    stored weights) and run on any number of batches."""

    def __init__(self, graph: Graph, fmt: WeightFormat = FP16):
        self.graph = graph
        self.scaled: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}  # LINEAR -> Q, s, b
        emulated = FP16 if fmt.row_scales is None else fmt.vectors  # unscaled: the float16 kernels' weights
        self.constants = dict(emulate_weights(graph, emulated).constants)
        if fmt.row_scales is not None:
            for node in graph.nodes:
                if node.op is Op.LINEAR:
                    weight = node.inputs[1]
                    elements, scales = fmt.stored(graph.constants[weight], "matrix", f"matrix {weight!r}")
                    bias = self.constants[node.inputs[2]] if len(node.inputs) > 2 else None
                    self.scaled[node.name] = (fmt.decode(elements), scales, bias)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = dict(self.constants)
        env.update({name: round_fp16(x) for name, x in feeds.items()})
        out = run_with_linears(self.graph, env, self._linear, next(iter(feeds.values())).shape[0])
        return {v.name: out[v.name] if v.dtype == "bool" else round_fp16(out[v.name]) for v in self.graph.outputs}

    def _linear(self, node: Node, inputs: list[np.ndarray]) -> np.ndarray:
        x = round_fp16(inputs[0])
        if node.name not in self.scaled:
            return round_fp16(ops.evaluate(Op.LINEAR, [x, *inputs[1:]], {}))
        elements, scales, bias = self.scaled[node.name]
        y = scaled_product(x, elements, scales)
        return y if bias is None else round_fp16(y + bias)


def run_fp16_emulation(graph: Graph, feeds: Mapping[str, np.ndarray],
                       fmt: WeightFormat = FP16) -> dict[str, np.ndarray]:
    """What the float16 arithmetic above computes for `feeds`, with weights stored in `fmt` (float16 by default: the
    oracle of the cooperative-vector backend)."""
    return Float16Emulation(graph, fmt).run(feeds)
