"""The reference the cooperative-matrix tile kernels are compared with: their float16 arithmetic in numpy.

float16 weights: `run_fp16_emulation` (inputs, weights and biases as float16, each Linear's input and result rounded
to float16, float32 sums). A block format (q8_0, q4_0) on coopmat2: the same arithmetic, with each weight the
block's decoded value d * (q - zero) (exact in float32) rounded once to float16 (nearest even, subnormals kept),
what the load's DecodeFunc returns, and each bias the format's float32 vector, added to the float32 sum before its
rounding. (`run_fp16_emulation` with a block format would round the float32 weights to float16 without the blocks:
it knows only unscaled and row-scaled formats.)
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from coopnn.graph.ir import Graph, Op
from coopnn.layouts.formats.emulation import Float16Emulation, emulate_weights, run_fp16_emulation
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import round_fp16


def decoded_weights(graph: Graph, fmt: WeightFormat) -> dict[str, np.ndarray]:
    """Each Linear's weights as a block format's load decodes them (float16 values) and its bias as stored
    (float32)."""
    stored = emulate_weights(graph, fmt).constants
    constants = {}
    for node in (n for n in graph.nodes if n.op is Op.LINEAR):
        weight, *bias = node.inputs[1:]
        constants[weight] = round_fp16(stored[weight])
        constants.update({name: stored[name] for name in bias})
    return constants


def run_tile_emulation(graph: Graph, feeds: Mapping[str, np.ndarray], fmt: WeightFormat) -> dict[str, np.ndarray]:
    """What a tile kernel computes for `feeds` with weights stored in `fmt` (the module docstring)."""
    if fmt.blocks is None:
        return run_fp16_emulation(graph, feeds, fmt)
    emulation = Float16Emulation(graph)
    emulation.constants.update(decoded_weights(graph, fmt))
    return emulation.run(feeds)
