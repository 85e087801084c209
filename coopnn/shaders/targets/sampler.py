"""The training batch sampler, defined once for the host (`sample_rows`, numpy) and for step kernels (`drawn_row`).

Batch `step` of a run seeded with `seed` takes, for its sample i, the data row
    row(i) = (h * rows) >> 32,   h = pcg(pcg(pcg(seed) + step) + i)
in wrapping 32-bit unsigned arithmetic, `pcg` being the PCG-RXS-M-XS output hash (Jarzynski and Olano, "Hash
Functions for GPU Rendering", JCGT 2020): rows drawn uniformly with replacement, a fixed function of (seed, step, i),
so a device reading its batches from the data set and a host indexing numpy arrays draw the same ones. With `whole`,
row(i) = i (the whole data set every step, in order, or a batch the host wrote).

A step kernel reads its inputs and targets at the rows `drawn_row` gives: push constants `rows`, `seed` and `whole`
(`TRAINING_PUSH_CONSTANTS`), and the step from the training state's `drawn` word, so a run of steps records the same
dispatch for each. Padding samples (past the push constant `batch`) read sample 0's row: their losses and gradients
are masked out, and a row of the batch keeps them as finite as the batch is.
"""

from __future__ import annotations

import numpy as np
from coopnn.shaders.spirv.ops import Ops

_MULTIPLIER, _INCREMENT, _OUTPUT_MULTIPLIER = 747796405, 2891336453, 277803737
_MASK = 0xFFFFFFFF
# The push constants a step kernel's sampler reads.
SAMPLER_PUSH_CONSTANTS = (("rows", "u32"), ("seed", "u32"), ("whole", "u32"))


def _pcg(x: np.ndarray) -> np.ndarray:
    state = (x * _MULTIPLIER + _INCREMENT) & _MASK
    word = (((state >> ((state >> 28) + 4)) ^ state) * _OUTPUT_MULTIPLIER) & _MASK
    return (word >> 22) ^ word


def sample_rows(seed: int, step: int, batch: int, rows: int, whole: bool = False) -> np.ndarray:
    """The data rows of batch `step` (int64, `batch` of them) drawn from `rows` rows."""
    if whole:
        return np.arange(batch, dtype=np.int64)
    key = _pcg((_pcg(np.uint64(seed & _MASK)) + np.uint64(step & _MASK)) & _MASK)
    hashed = _pcg((key + np.arange(batch, dtype=np.uint64)) & _MASK)
    return ((hashed * np.uint64(rows)) >> np.uint64(32)).astype(np.int64)


def drawn_row(frame, sample, drawn_word: int):
    """The data row (a u32 id) sample `sample` (a u32 id) reads in a training step kernel's frame (a `ShaderFrame`
    with the sampler's push constants and a training state binding whose word `drawn_word` is the step). With
    `whole` the state is not read: a kernel on a batch the host wrote starts its input loads without waiting on it."""
    fn, u32, uint = frame.main, frame.u32, frame.uint

    def op(instruction, *operands):
        return instruction(fn.ops, u32, *operands)

    def pcg(x):
        state = op(Ops.int_add, op(Ops.int_mul, x, uint(_MULTIPLIER)), uint(_INCREMENT))
        shift = op(Ops.int_add, op(Ops.shift_right, state, uint(28)), uint(4))
        word = op(Ops.int_mul, op(Ops.bitwise_xor, op(Ops.shift_right, state, shift), state),
                  uint(_OUTPUT_MULTIPLIER))
        return op(Ops.bitwise_xor, op(Ops.shift_right, word, uint(22)), word)

    inside = fn.ops.uint_less(frame.bool, sample, frame.push_value("batch"))
    sample = fn.ops.select(u32, inside, sample, frame.zero)
    row = fn.variable(u32, name="data_row")
    fn.ops.store(row, sample)
    rows, seed = frame.push_value("rows"), frame.push_value("seed")
    with fn.if_(fn.ops.int_equal(frame.bool, frame.push_value("whole"), frame.zero)):
        step = fn.ops.bitcast(u32, fn.ops.load(frame.f32, frame.element_pointer(
            frame.state_binding, uint(drawn_word))))
        key = pcg(op(Ops.int_add, pcg(seed), step))
        wide = fn.ops.uint_mul_extended(frame.module.type_struct([u32, u32]), pcg(op(Ops.int_add, key, sample)), rows)
        fn.ops.store(row, fn.ops.extract(u32, wide, 1))
    return fn.ops.load(u32, row)
