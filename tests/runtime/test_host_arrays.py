"""Pooled output arrays: a block returns to the pool only when the last view of it is gone, and is reused."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from coopnn.runtime import host_arrays


def test_small_arrays_are_plain_numpy():
    a = host_arrays.empty((10, 3), np.float32)
    assert a.shape == (10, 3) and a.dtype == np.float32 and a.flags.owndata


def test_a_block_comes_back_only_after_every_view_is_gone(monkeypatch):
    pool = host_arrays._BlockPool(1 << 30)
    monkeypatch.setattr(host_arrays, "_POOL", pool)
    a = host_arrays.empty((1 << 18, 4), np.float32)
    assert a.flags.c_contiguous and a.flags.writeable and a.shape == (1 << 18, 4)
    address = a.ctypes.data
    view = a[5:9]
    del a
    gc.collect()
    view[:] = 7.0  # still backed by the block
    assert len(pool._idle) == 0
    del view
    gc.collect()
    assert len(pool._idle) == 1
    again = host_arrays.empty((1 << 18, 4), np.float32)
    assert again.ctypes.data == address and len(pool._idle) == 0


def test_idle_blocks_are_bounded(monkeypatch):
    pool = host_arrays._BlockPool(3 << 20)
    monkeypatch.setattr(host_arrays, "_POOL", pool)
    arrays = [host_arrays.empty((1 << 20,), np.uint8) for _ in range(5)]
    del arrays
    gc.collect()
    assert pool._idle_bytes <= 3 << 20 and len(pool._idle) == 3


def test_the_smallest_fitting_block_is_taken(monkeypatch):
    pool = host_arrays._BlockPool(1 << 30)
    monkeypatch.setattr(host_arrays, "_POOL", pool)
    big, small = host_arrays.empty((3 << 20,), np.uint8), host_arrays.empty((2 << 20,), np.uint8)
    small_address = small.ctypes.data
    del big, small
    gc.collect()
    assert host_arrays.empty((3 << 19,), np.uint8).ctypes.data == small_address


class _FakeImport:
    def __init__(self):
        self.alive = True

    def destroy(self):
        self.alive = False


def test_blocks_are_page_aligned_and_found_from_views(monkeypatch):
    monkeypatch.setattr(host_arrays, "_POOL", host_arrays._BlockPool(1 << 30))
    a = host_arrays.empty((1 << 16, 8), np.float32)
    block, offset = host_arrays.block_of(a[100:])
    assert block.address % 4096 == 0 and block.size % host_arrays.BLOCK_GRANULE == 0
    assert offset == 100 * 8 * 4
    assert host_arrays.block_of(np.empty((1 << 16, 8), np.float32)) is None


def test_imports_are_made_once_per_context_and_released_before_the_memory(monkeypatch):
    pool = host_arrays._BlockPool(host_arrays.BLOCK_GRANULE * 16)
    monkeypatch.setattr(host_arrays, "_POOL", pool)
    block = host_arrays.Block(1 << 20)
    made = []
    first = block.imported(1, lambda: made.append(_FakeImport()) or made[-1])
    assert block.imported(1, lambda: pytest.fail("imported twice")) is first
    first.alive = False  # released with its context
    assert block.imported(1, lambda: made.append(_FakeImport()) or made[-1]) is made[1]
    pool.give_back(block)
    pool.give_back(host_arrays.Block(1 << 20))  # over the idle limit: the oldest block goes
    assert made[1].alive is False
