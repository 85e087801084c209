"""The outer-product weight-gradient methods of the coopvec training session: where the step kernel's float16
accumulators sit, and the commands that turn them into the float32 gradient the optimizer reads.

The step kernel accumulates (`coopnn.backends.coopvec.accumulate`) into entries placed after the weights in the
weight buffer, zeroed before every step kernel:

- "outer_product": TrainingOptimal matrices (OpCooperativeVectorOuterProductAccumulateNV per sample) and float16
  biases; after the step kernel, vkCmdConvertCooperativeVectorMatrixNV turns them into a row-major float16 copy in the
  flat parameter order (biases copied), which `widen_shader` widens;
- "outer_product_reduced": workgroup sums added row by row to row-major float16 accumulators that already are in the
  flat parameter order, widened where they are.

The sums are float16 (the H100 offers no float32 accumulation), summed over the whole batch: an overflow is an
infinite sum, which the widening reports in the status word like any non-finite gradient, so dynamic loss scaling
skips the step and halves the scale.
"""

from __future__ import annotations

from typing import Callable, Mapping

from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.pack import MATRIX_ALIGNMENT, VECTOR_ALIGNMENT, Entry, WeightImage, align_up
from coopnn.shaders.training.layout import ParameterLayout
from coopnn.train.gpu.step_program import gradient_name

# gradient method -> the layout of its weight-gradient accumulators (which `accumulate.py` lowers by)
ACCUMULATOR_LAYOUTS = {"outer_product": "training_optimal", "outer_product_reduced": "row_major"}
FEATURES = frozenset({"cooperativeVectorTraining"})


def accumulators(parameters: ParameterLayout, layout: str, start: int,
                 optimal_size: Callable[[int, int], int]) -> dict[str, Entry]:
    """Accumulator entries by gradient parameter name, from byte `start` on: row-major ones in the flat parameter
    order, or TrainingOptimal matrices (of `optimal_size(rows, cols)` bytes) and float16 biases."""
    base = align_up(start, MATRIX_ALIGNMENT)
    flat = parameters.entries(FP16)
    if layout == "row_major":
        return {gradient_name(name): Entry(gradient_name(name), base + e.offset, e.size, e.shape, e.layout, e.dtype,
                                           e.stride) for name, e in flat.items()}
    entries, offset = {}, base
    for name, e in flat.items():
        matrix = e.layout != "vector"
        offset = align_up(offset, MATRIX_ALIGNMENT if matrix else VECTOR_ALIGNMENT)
        size = optimal_size(*e.shape) if matrix else e.size
        entries[gradient_name(name)] = Entry(gradient_name(name), offset, size, e.shape,
                                             layout if matrix else "vector", e.dtype)
        offset += size
    return entries


def with_accumulators(weights: WeightImage, entries: Mapping[str, Entry]) -> WeightImage:
    """The weight image followed by zeroed accumulators."""
    end = align_up(max(e.offset + e.size for e in entries.values()), VECTOR_ALIGNMENT)
    return WeightImage(weights.data + bytes(end - len(weights.data)), {**weights.entries, **entries})


def accumulator_range(entries: Mapping[str, Entry]) -> tuple[int, int]:
    """(first byte, bytes) of the accumulators: what is zeroed before each step (a multiple of 4 bytes)."""
    first = min(e.offset for e in entries.values())
    end = align_up(max(e.offset + e.size for e in entries.values()), 4)
    return first, end - first


def by_parameter(entries: Mapping[str, Entry], parameters: ParameterLayout) -> dict[str, Entry]:
    """The accumulator entries keyed by the names of the parameters they sum the gradients of."""
    return {name: entries[gradient_name(name)] for name in parameters.entries(FP16)}
