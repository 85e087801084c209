"""Weight formats by name, each with the numpy emulation of its rounding (the oracle for quantized backends)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

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
