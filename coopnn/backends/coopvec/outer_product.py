"""The outer-product weight-gradient methods of the coopvec training session (`OuterProducts`, the members
`gradient_methods/outer_product.py` and `outer_product_reduced.py`): where the per-sample step kernel's float16
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

from coopnn.backends.coopvec.step_kernels.coopvec import optimal_size
from coopnn.errors import CompileError
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.pack import MATRIX_ALIGNMENT, VECTOR_ALIGNMENT, Entry, WeightImage, align_up
from coopnn.shaders.training.gradients import widen_shader
from coopnn.shaders.training.layout import ParameterLayout
from coopnn.train.gpu.families import GradientMethod
from coopnn.train.gpu.step_program import gradient_name

FEATURES = frozenset({"cooperativeVectorTraining"})
# The outer-product methods take layers up to this many inputs and outputs: wider ones ran for minutes a step on the
# H100 (bench/results/nvidia-h100-80gb-hbm3-2026-11-25-training-gradient-methods-b65536.md), so they are refused
# rather than left to run that long.
OUTER_PRODUCT_WIDEST = 64


def accumulators(parameters: ParameterLayout, layout: str, start: int,
                 optimal_size: Callable[[int, int], int]) -> dict[str, Entry]:
    """Accumulator entries by gradient parameter name, from byte `start` on: row-major ones in the flat parameter
    order, or TrainingOptimal matrices (of `optimal_size(rows, cols)` bytes) and float16 biases; the layers' only (a
    trained grid's gradient the step kernel adds into a buffer of its own: `table_atomics`)."""
    base = align_up(start, MATRIX_ALIGNMENT)
    flat = parameters.entries(FP16, tables=False)
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
    return {name: entries[gradient_name(name)] for name in parameters.entries(FP16, tables=False)}


class OuterProducts(GradientMethod):
    """Weight gradients the per-sample step kernel accumulates itself, in accumulators of `layout` (which
    `accumulate.py` lowers by), widened into the float32 gradient after it."""

    keeps_tape = False
    accumulates = True
    features = FEATURES
    device_features = FEATURES

    def __init__(self, name: str, layout: str):
        self.name, self.layout = name, layout

    def step_for(self, requested: str) -> str:
        if requested not in ("auto", "coopvec"):
            raise ValueError(f"gradients={self.name!r} accumulates in the coopvec step kernel, not the {requested} one")
        return "coopvec"

    def shaders(self, session):
        widest = max(max(layer.rows, layer.cols) for layer in session.layout.layers)
        if widest > OUTER_PRODUCT_WIDEST:
            raise CompileError(f"gradients={self.name!r} takes layers of up to {OUTER_PRODUCT_WIDEST} "
                               f"inputs and outputs, this model has {widest}: accumulating outer products that "
                               f"wide ran for minutes on the H100; use gradients='coopvec' or 'auto'")
        return [widen_shader()]

    def weight_image(self, session, packed):
        session.accumulators = accumulators(session.layout, self.layout, len(packed.data),
                                            lambda rows, cols: optimal_size(session.context, rows, cols))
        return with_accumulators(packed, session.accumulators)

    def step_prologue(self, session) -> list:
        from coopnn.runtime.vk.commands import Recorded
        from coopnn.runtime.vk.loader import load_vulkan

        vk, (first, size) = load_vulkan(), accumulator_range(session.accumulators)
        return [Recorded(lambda cmd: vk.vkCmdFillBuffer(cmd, session.optimal.handle, first, size, 0))]

    def sums(self, session) -> tuple[list, object, int]:
        """(commands, buffer, first float16 element) of the sums `products` widens: the accumulators themselves."""
        return [], session.optimal, session.accumulators[next(iter(session.accumulators))].offset // 2

    def products(self, session, batch: int, count: int) -> tuple[list, int]:
        from coopnn.runtime.vk.commands import Dispatch

        (widen,), (kernel,) = session.gradient_shaders, session.gradient_kernels
        steps, sums, first = self.sums(session)
        size = session.layout.layers_size  # a trained grid's gradient the step kernel adds itself
        return steps + [Dispatch(kernel, (sums, session.gradient, session.state),
                                 widen.pack_push(count=size, first=first, to=0, shared=0),
                                 kernel.group_count_for(size))], 0
