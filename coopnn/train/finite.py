"""Training data tested for NaN and infinity: the first sample that is not finite, and the error naming it. The
Trainer tests host data before a step or a fit; a GPU session tests a step's host arrays as it copies them
(`coopnn.train.gpu.batch_inputs`) and names the sample here."""

from __future__ import annotations

import numpy as np

from coopnn.errors import InputError
from coopnn.runtime.copies import sums_finite

FINITE_CHECK_ROWS = 1 << 16  # samples of host data tested for NaN and infinity at a time


def first_non_finite(array: np.ndarray) -> int | None:
    """The first sample (row) of `array` holding NaN or infinity, or None. The sums of its parts are not finite where
    a sample is not (or, rarely, where finite values overflow one), so only then are the samples tested, in chunks so
    that no mask of the whole data set is made: one pass over the data otherwise, on the copy threads
    (`copies.sums_finite`)."""
    rows = array.reshape(len(array), -1)
    if sums_finite(rows):
        return None
    for first in range(0, len(rows), FINITE_CHECK_ROWS):
        finite = np.isfinite(rows[first:first + FINITE_CHECK_ROWS]).all(axis=1)
        if not finite.all():
            return first + int(np.argmin(finite))
    return None


def non_finite_error(what: str, name: str, row: int) -> InputError:
    """The error for data `name` (`what`: "input" or "targets for") whose sample `row` is not finite."""
    return InputError(f"{what} {name!r} holds NaN or infinity (first in sample {row}): one such sample makes every "
                      f"parameter NaN; drop or replace those samples")
