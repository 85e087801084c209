"""`copy_rows`: the threaded copy equals numpy's own for every split, dtype and memory order; `sums_finite` finds NaN
and infinity in any part, on the pool or not."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.runtime import copies


@pytest.mark.parametrize("source", ["float64", "float16", "fortran", "strided", "float32"])
def test_threaded_copy_equals_numpy(monkeypatch, source):
    monkeypatch.setattr(copies, "MIN_BYTES_PER_THREAD", 64)
    base = np.random.default_rng(0).uniform(-1, 1, (1001, 7))
    src = {"float64": base, "float16": base.astype(np.float16), "fortran": np.asfortranarray(base),
           "strided": np.repeat(base, 3, axis=0)[::3], "float32": base.astype(np.float32)}[source]
    dst = np.full((1001, 7), np.nan, np.float32)
    copies.copy_rows(dst, src)
    np.testing.assert_array_equal(dst, src.astype(np.float32))


def test_small_copies_stay_on_the_calling_thread(monkeypatch):
    monkeypatch.setattr(copies, "_executor", lambda: pytest.fail("a small copy used the thread pool"))
    dst = np.empty((10, 3), np.float32)
    copies.copy_rows(dst, np.ones((10, 3)))
    assert (dst == 1).all()


def test_a_started_copy_finishes_in_the_background_and_reports_errors(monkeypatch):
    monkeypatch.setattr(copies, "MIN_BYTES_PER_THREAD", 64)
    src = np.random.default_rng(1).uniform(-1, 1, (5000, 9))
    dst = np.empty((5000, 9), np.float32)
    copies.start_copy(dst, src).wait()
    np.testing.assert_array_equal(dst, src.astype(np.float32))
    with pytest.raises(ValueError):
        copies.start_copy(np.empty((5000, 8), np.float32), src).wait()


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("where", [0, 517, 1000])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_sums_finite_finds_a_value_that_is_not_finite_in_any_part(monkeypatch, threads, where, bad):
    monkeypatch.setattr(copies, "SUM_BYTES", 7 * 4 * 50)  # parts of 50 rows
    rows = np.random.default_rng(0).uniform(-1, 1, (1001, 7)).astype(np.float32)
    assert copies.sums_finite(rows, threads)
    rows[where, 3] = bad
    assert not copies.sums_finite(rows, threads)


def test_sums_finite_of_a_small_array_stays_on_the_calling_thread(monkeypatch):
    monkeypatch.setattr(copies, "_executor", lambda: pytest.fail("a small test used the thread pool"))
    assert copies.sums_finite(np.ones((10, 3), np.float32))
    assert not copies.sums_finite(np.full((10, 3), np.nan, np.float32))


def test_sums_that_overflow_read_as_not_finite():
    # the caller then tests the samples one by one (`Trainer`)
    assert not copies.sums_finite(np.full((4, 4), 3e38, np.float32))
