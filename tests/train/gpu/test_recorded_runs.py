"""How a run of training steps is cut into blocks (`_block_size`): one step first, each block at most 4 times the one
before and no longer than BLOCK_SECONDS by the GPU time of a step of the last block finished, and never past the
run's end."""

from __future__ import annotations

from coopnn.train.gpu.recorded_runs import BLOCK_SECONDS, BLOCKS, _block_size


def test_blocks_grow_fourfold_from_one_step_while_the_steps_are_untimed():
    sizes, last = [], 0
    for _ in range(7):
        last = _block_size(10_000, last, None)
        sizes.append(last)
    assert sizes == [1, 4, 16, 64, 256, 256, 256] and max(BLOCKS) == 256


def test_a_block_lasts_no_longer_than_block_seconds_by_the_steps_timed():
    step_ms = 1.5
    per_block = int(BLOCK_SECONDS * 1e3 / step_ms)  # 66 steps
    assert _block_size(10_000, 256, step_ms) == max(size for size in BLOCKS if size <= per_block)
    assert _block_size(10_000, 256, 1e4) == 1  # slower than BLOCK_SECONDS a step: one step a block
    assert _block_size(10_000, 16, None) == 64  # no timestamps: growth alone


def test_the_last_blocks_fit_what_is_left():
    assert _block_size(3, 256, None) == 1
    assert _block_size(70, 256, None) == 64
    left, total, last = 86, 0, 0
    while left:
        last = _block_size(left, last, None)
        left, total = left - last, total + last
    assert total == 86
