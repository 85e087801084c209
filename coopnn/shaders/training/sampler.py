"""The training batch sampler, defined once for the host (`sample_rows`, numpy) and the device (`gather_shader`).

Batch `step` of a run seeded with `seed` takes, for its sample i, the data row
    row(i) = (h * rows) >> 32,   h = pcg(pcg(pcg(seed) + step) + i)
in wrapping 32-bit unsigned arithmetic, `pcg` being the PCG-RXS-M-XS output hash (Jarzynski and Olano, "Hash
Functions for GPU Rendering", JCGT 2020): rows drawn uniformly with replacement, a fixed function of (seed, step, i),
so a device gathering its batches and a host indexing numpy arrays draw the same ones. With `whole`, row(i) = i (the
whole data set every step, in order).

`gather_shader`: one invocation per element of the batch; bindings 0 source (f32, `rows` x `features`), 1 batch
(f32, written), 2 the training state words (u32, `TRAINING_STATE_FIELDS`: the step is the `drawn` word, so a run of
steps records the same dispatch for each); push `count` (batch x features), `features`, `rows`, `seed`, `whole`.
"""

from __future__ import annotations

import numpy as np

from coopnn.shaders.targets.base import TRAINING_STATE_FIELDS, Binary, push_constant_block
from coopnn.shaders.training.shader import finish, load, storage_buffer, store, training_frame

SOURCE, BATCH, STATE = range(3)
_MULTIPLIER, _INCREMENT, _OUTPUT_MULTIPLIER = 747796405, 2891336453, 277803737
_MASK = 0xFFFFFFFF


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


def gather_shader() -> Binary:
    """The batch of one input drawn from its whole data set on the device."""
    push = push_constant_block(("count", "u32"), ("features", "u32"), ("rows", "u32"), ("seed", "u32"),
                               ("whole", "u32"))
    frame = training_frame(push)
    m, fn, u32 = frame.module, frame.main, frame.u32
    storage_buffer(frame, SOURCE, frame.f32, writable=False, name="source")
    storage_buffer(frame, BATCH, frame.f32, writable=True, name="batch")
    storage_buffer(frame, STATE, frame.u32, writable=False, name="state")

    def op(name, *operands):
        return fn.emit(name, u32, *operands)

    def pcg(x):
        state = op("OpIAdd", op("OpIMul", x, frame.uint(_MULTIPLIER)), frame.uint(_INCREMENT))
        shift = op("OpIAdd", op("OpShiftRightLogical", state, frame.uint(28)), frame.uint(4))
        word = op("OpIMul", op("OpBitwiseXor", op("OpShiftRightLogical", state, shift), state),
                  frame.uint(_OUTPUT_MULTIPLIER))
        return op("OpBitwiseXor", op("OpShiftRightLogical", word, frame.uint(22)), word)

    features = frame.push_value("features")
    sample = op("OpUDiv", frame.sample, features)
    feature = op("OpUMod", frame.sample, features)
    step = load(frame, STATE, frame.uint(TRAINING_STATE_FIELDS.index("drawn")), u32)
    key = pcg(op("OpIAdd", pcg(frame.push_value("seed")), step))
    wide = fn.emit("OpUMulExtended", m.type_struct([u32, u32]), pcg(op("OpIAdd", key, sample)),
                   frame.push_value("rows"))
    drawn = fn.emit("OpCompositeExtract", u32, wide, 1)
    whole = fn.emit("OpINotEqual", frame.bool, frame.push_value("whole"), frame.zero)
    row = fn.emit("OpSelect", u32, whole, sample, drawn)
    store(frame, BATCH, frame.sample, load(frame, SOURCE, op("OpIAdd", op("OpIMul", row, features), feature)))
    return finish("gather", frame, 3, frozenset())
